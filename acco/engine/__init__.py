"""Shared training machinery: flat buffers, sharded AdamW, collectives, a communication worker,
and the round schedules that make the four methods."""
