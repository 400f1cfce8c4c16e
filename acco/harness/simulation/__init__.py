"""The methods' schedules simulated at cluster scale (8–1024 GPUs): a discrete-event model of each
round — compute per micro-batch, the sync's reduce-scatter / optimizer step / all-gather on a
hierarchical topology, each method's overlap rule — with per-worker speed drawn from a straggler
distribution.

Every method has a payload precision; DiLoCo replicas can be many GPUs (sharded data parallel inside,
the outer sync between them); fragments, overlap τ and layer-wise fragments are free; a model can be
one's own (Ψ, layers, a measured step time) and bandwidths nccl-tests' busbw; a contention term slows
compute beside a sync (off by default). results/sim/validation.md checks it against published numbers.

It predicts TIME ONLY: samples/s, GPU idle fraction, time per committed step and, for the adaptive
methods, the effective batch per step. It does not predict loss: a method that commits larger,
fewer or staler steps trains differently, and nothing here says by how much.

    models.py      the model shapes (GPT-Neo 125M-2.7B, Llama-2 7B-70B) and their FLOPs
    topology.py    GPUs per node, intra/inter-node links, hierarchical ring collectives, sync times
    stragglers.py  per-worker slowdown factors: none, log-normal, heavy tail, one slow node
    schedules.py   the methods' rounds as events, vectorised over scenarios and workers (numpy)
    fsdp.py        FSDP (FULL_SHARD, SHARD_GRAD_OP) layer by layer: gathers, reduce-scatters, prefetch
    variants.py    the methods as the trainer spells them, and each one's schedule from its spec's facts
    sweep.py       a scenario -> each method's outputs; grids of scenarios for the figures
"""
