"""Streaming DiLoCo (Douillard et al. 2025, arXiv 2501.18512): DiLoCo whose model is cut into
fragments, each synced in turn beside the next overlap_steps inner steps and mixed in when it lands."""

from dataclasses import replace

from .diloco import SPEC as DILOCO

SPEC = replace(DILOCO, name="streaming_diloco", label="Streaming DiLoCo", fragmented=True)
