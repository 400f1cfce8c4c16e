"""Each node's host (CPU) memory for a GPU run, estimated before anything starts: what a Slurm job's
--mem must hold. The training state lives on the GPUs; host memory peaks in the phases around it,
which do not overlap, so a node's peak is the largest phase summed over the ranks it holds:

    start      every rank builds (or loads) its model in fp32 in host memory before it moves to its
               GPU: 4 bytes per parameter per rank (a pretrained model's weights file is mapped as
               well: page cache, shared by the node's ranks, not counted)
    save       a checkpoint save: each rank streams its state through host memory one piece at a
               time (PIECE_BYTES; measured: results/bench/checkpoint.json)
    resume     loading a checkpoint: one piece per rank, and for PyTorch DDP its ZeRO partition's
               moments, built in host memory before the optimizer moves them to the GPU
    end        rank 0 alone: the final parameters as an fp32 vector (train.save_final_params) and
               the model's host copy with its serialised shard (train.save_model)

on top of every rank's process baseline (Python, PyTorch, CUDA's host side, NCCL, the data loader:
an assumption, HOST_BASELINE_BYTES)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..config.schema import RunView
from .checkpoint_state import PIECE_BYTES
from .memory import GB, model_shape, state_layout, zero_partition

HOST_BASELINE_BYTES = 4.0 * GB  # per rank (an assumption: a CUDA process with torch and NCCL loaded)
SAVE_SHARD_BYTES = 5.0 * GB  # Hugging Face's save_pretrained writes the model in shards of at most this
PER_RANK_SLACK_BYTES = 2 * PIECE_BYTES + 64 * 2**20  # a piece read, its tensor, DCP's planning


@dataclass(frozen=True)
class HostMemory:
    ranks_per_node: int
    phases: dict[str, int]  # phase -> the node's bytes in it (baselines included)

    @property
    def peak_bytes(self) -> int:
        return max(self.phases.values())

    @property
    def peak_gb(self) -> float:
        return self.peak_bytes / GB

    @property
    def peak_phase(self) -> str:
        return max(self.phases, key=lambda k: self.phases[k])

    def line(self) -> str:
        parts = ", ".join(f"{k} {v / GB:.0f}" for k, v in self.phases.items())
        return f"{self.peak_gb:.0f} GB per node ({self.ranks_per_node} ranks; GB by phase: {parts})"


def host_memory(cfg: RunView, world: int, ranks_per_node: int) -> HostMemory:
    """A node's host memory by phase for `cfg` on `world` ranks, `ranks_per_node` of them per node."""
    params = model_shape(cfg).params
    layout = state_layout(cfg, gpu=True)
    base = ranks_per_node * HOST_BASELINE_BYTES
    per_rank_resume = PER_RANK_SLACK_BYTES
    if not layout.flat:  # PyTorch ZeRO: the largest partition's m and v (fp32), built on the host
        elements = max(n for n, _ in zero_partition(model_shape(cfg).groups, world))
        per_rank_resume += 8 * elements
    train = cfg.get("train") or {}
    end = 0.0
    if train.get("save_final_params"):
        end += 4 * params
    if train.get("save_model"):
        model_bytes = params * (4 if not layout.flat else layout.param_bytes)
        end += model_bytes + min(model_bytes, SAVE_SHARD_BYTES)
    phases = {
        "start": int(base + ranks_per_node * 4 * params),
        "save": int(base + ranks_per_node * PER_RANK_SLACK_BYTES),
        "resume": int(base + ranks_per_node * per_rank_resume),
        "end": int(base + end),
    }
    return HostMemory(ranks_per_node, phases)


def host_fit_problem(cfg: RunView, world: int, ranks_per_node: int) -> str | None:
    """One line when the profile's launcher.mem_gb (a node's --mem) is below the estimate; None
    when it holds, or when the profile asks for no figure (whole nodes: --mem=0)."""
    mem_gb = (cfg.get("launcher") or {}).get("mem_gb")
    if not mem_gb:
        return None
    est = host_memory(cfg, world, ranks_per_node)
    if est.peak_gb <= float(mem_gb):
        return None
    import os

    exp = (cfg.get("experiment") or {}).get("id") or "this"
    name = os.path.basename(os.path.normpath(cfg.get("out_dir") or "")) or cfg["method"]["name"]
    return (
        f"{exp} run {name}: estimated {est.line()} exceeds launcher.mem_gb={mem_gb:g}: set "
        f"launcher.mem_gb={math.ceil(est.peak_gb * 1.1)} or null (whole nodes, --mem=0)"
    )
