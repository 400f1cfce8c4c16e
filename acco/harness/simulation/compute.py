"""A micro-batch's compute as its shape makes it: MFU as a function of the micro-batch's tokens, and
activation recomputation.

**MFU by tokens.** A GPU runs a small micro-batch (micro_batch × seq_len tokens) less efficiently than
a large one: its matrix multiplications are thinner and the fixed costs of a forward and backward
(kernel launches, FSDP's gathers, the loss over the vocabulary) are shared by fewer tokens. An
`MfuTable` holds published (tokens, MFU) points; between two points MFU is interpolated in
log(tokens), outside them it stays at the nearest point's value (nothing is extrapolated). MFU is on
the simulator's count, 6·Ψ·tokens FLOPs per micro-batch, recomputed here from each
source's published tokens/s/GPU: MFU = 6·Ψ·(tokens/s/GPU) / peak (A100 312, H100 989 TFLOP/s bf16).

**Which table a preset uses** (the rule, fixed before any validation row was compared with it):

1. The 6·Ψ count leaves attention's s² FLOPs out; their share of a step, 2·L·d·s/Ψ, is 8 % for a 7B
   model at 2,048 tokens per sequence, 16 % at 4,096 and 27 % for Llama 3 8B at 8,192. An MFU measured
   at 2,048 therefore overstates the 6·Ψ MFU of the presets' models, which run at 4,096–8,192. So the
   points come from PyTorch-FSDP runs of Llama models at sequence lengths of 4,096 or more, without
   full activation checkpointing (that is `recompute`, below): torchtitan and IBM's fms-fsdp.
2. At the token count of the run each preset was validated on (torchtitan's), the preset keeps its
   MFU (A100 0.45 at 8,192 tokens, H100 0.30 at 16,384), so a run of that shape predicts what it did.
3. Where those runs have no point at a smaller token count, the point is the anchor times the ratio
   between the same GPU's 4,096- and 12,288-token rows in MosaicML llm-foundry's tables, the one suite
   found that publishes several micro-batch token counts on one GPU (a ratio, never its level: its
   rows are at 2,048 tokens per sequence and its stack is faster).
4. A GPU with no runs of its own takes the table of the one with the same tensor cores and peak:
   A100 40GB the A100's, H200 the H100's (torchtitan's H200 benchmark ran Float8 only).

llm-foundry's own points are kept as named tables (`MFU_TABLES`, for `--mfu-table NAME`), for
simulating runs of that stack. One's own table: a CSV of tokens,mfu rows (`read_table`).

**Recomputation** (activation checkpointing): the backward recomputes each layer's forward before
using it, one extra forward per micro-batch, so the micro-batch takes 1 + FORWARD_SHARE = 4/3 of
its time (the 2:1 backward:forward FLOP split of the overlap model's BACKWARD_SHARE), all of it
in the backward: the forward is 1/4 of the micro-batch, the backward 3/4. MFU stays on the
6·Ψ·tokens model FLOPs (llm-foundry's MFU, not its HFU).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .models import FORWARD_SHARE

if TYPE_CHECKING:  # .topology imports this module
    from .topology import Topology

# one extra forward per micro-batch (2Ψ of 6Ψ per token)
RECOMPUTE_FACTOR = 1.0 + FORWARD_SHARE


@dataclass(frozen=True)
class MfuTable:
    """(tokens per micro-batch, MFU) points, tokens ascending; `at` interpolates in log(tokens)."""

    name: str
    points: tuple[tuple[float, float], ...]

    def __post_init__(self):
        if not self.points:
            raise ValueError(f"MFU table {self.name!r}: no points")
        tokens = [t for t, _ in self.points]
        if any(not (math.isfinite(t) and t > 0) for t in tokens):
            raise ValueError(f"MFU table {self.name!r}: tokens must be positive numbers")
        if any(b <= a for a, b in zip(tokens, tokens[1:])):
            raise ValueError(f"MFU table {self.name!r}: tokens must be strictly increasing")
        if any(not (0 < m <= 1) for _, m in self.points):
            raise ValueError(f"MFU table {self.name!r}: every MFU must be a fraction of the peak, in (0, 1]")

    def at(self, tokens: float) -> float:
        """MFU at a micro-batch of `tokens`: linear in log(tokens) between points, flat outside."""
        pts = self.points
        if tokens <= pts[0][0]:
            return pts[0][1]
        for (t0, m0), (t1, m1) in zip(pts, pts[1:]):
            if tokens <= t1:
                w = math.log(tokens / t0) / math.log(t1 / t0)
                return m0 + w * (m1 - m0)
        return pts[-1][1]

    def describe(self) -> str:
        return f"{self.name}: " + ", ".join(f"{t:g} tokens {m:.3g}" for t, m in self.points)


MFU_TABLES: dict[str, MfuTable] = {
    # A100 80GB SXM, PyTorch FSDP, Llama, sequence length >= 4096, no full activation checkpointing
    "A100": MfuTable(
        "A100",
        (
            # IBM fms-fsdp README.md (foundation-model-stack/fms-fsdp, commit 0d319983): Llama 2 13B,
            # batch 1 x 4096, HSDP, no activation checkpointing, 128 A100 80GB: 1700 tokens/s/GPU;
            # 6·13.02e9·1700/312e12 = 0.4255. Its later README: "for 13B we are not utilizing the
            # hardware as well (only 0.48 MFU) because of smaller batch size" (0.48: attention counted)
            (4096.0, 0.425),
            # pytorch/torchtitan docs/performance.md (2024): Llama 3 8B, batch 1 x 8192, FSDP, selective
            # layer checkpointing, 64 A100 80GB: 2904 tokens/s/GPU; 6·8.03e9·2904/312e12 = 0.448 (the
            # preset's MFU before issue 51). At 8192 tokens fms-fsdp's Llama 2 7B (batch 2 x 4096, 3650
            # tokens/s/GPU: 0.47) and torchtitan's Llama 2 13B (batch 2 x 4096, 2162: 0.54) ran faster:
            # rule 2 keeps the anchor. Flat above: no such run with more tokens per micro-batch, and
            # llm-foundry's A100 7B-13B rows stay within ±5 % from 4096 to 65536 tokens
            (8192.0, 0.45),
        ),
    ),
    # H100 SXM (989 TFLOP/s); rule 3 for the small micro-batch
    "H100": MfuTable(
        "H100",
        (
            # 0.30 × 0.3737/0.4300: mosaicml/llm-foundry scripts/train/benchmarking/README.md, H100 80GB
            # bf16, FSDP, no activation checkpointing, 8 GPUs, 2048 per sequence: 13B at micro-batch 2
            # (4096 tokens) 4792 tokens/s/GPU, 6·12.85e9·4792/989e12 = 0.3737; 7B at micro-batch 6 (12288
            # tokens) 10643, 6·6.66e9·10643/989e12 = 0.4300
            (4096.0, 0.261),
            # pytorch/torchtitan docs/performance.md (2024-12): Llama 3.1 8B, batch 2 x 8192 (16384
            # tokens), FSDP, selective checkpointing, 8 H100: 5762-6667 tokens/s/GPU without/with
            # torch.compile, 6·8.03e9·tokens/s/989e12 = 0.28-0.32 (the preset's MFU before issue 51),
            # from 12288 tokens on, where llm-foundry's ratio is taken. Beside it: fms-fsdp's Llama 2 7B
            # (batch 2 x 4096, no checkpointing, 96 H100: 7500 tokens/s/GPU) gives 0.307 at 8192 tokens
            (12288.0, 0.30),
        ),
    ),
    # mosaicml/llm-foundry scripts/train/benchmarking/README.md, 8 GPUs, FSDP, bf16, no activation
    # checkpointing, 2048 per sequence: 13B at micro-batch 2, 7B at micro-batch 6 (MPT: 12.85e9 and
    # 6.66e9 parameters); MFU recomputed on 6·Ψ·tokens from its tokens/s/GPU column
    "llm-foundry-A100": MfuTable(
        "llm-foundry-A100",
        (
            (4096.0, 0.559),  # A100 80GB: 2262 tokens/s/GPU, 6·12.85e9·2262/312e12
            (12288.0, 0.594),  # A100 80GB: 4641 tokens/s/GPU, 6·6.66e9·4641/312e12
        ),
    ),
    "llm-foundry-H100": MfuTable(
        "llm-foundry-H100",
        (
            (4096.0, 0.374),  # H100 80GB: 4792 tokens/s/GPU, 6·12.85e9·4792/989e12
            (12288.0, 0.430),  # H100 80GB: 10643 tokens/s/GPU, 6·6.66e9·10643/989e12
        ),
    ),
}
# rule 4: the GPUs with no table of their own
PRESET_TABLES = {"A100": "A100", "A100-40GB": "A100", "H100": "H100", "H200": "H100"}


def preset_table(gpu: str) -> MfuTable | None:
    """The MFU table of a simulator preset (None for a GPU without one: its constant MFU)."""
    name = PRESET_TABLES.get(gpu)
    return MFU_TABLES[name] if name else None


def read_table(path: str | Path) -> MfuTable:
    """One's own table: a CSV of `tokens,mfu` rows (a header line of those names is optional), any
    order. Raises ValueError with a one-line reason."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ValueError(f"--mfu-table {path}: cannot read it ({exc.strerror or exc})") from None
    points: list[tuple[float, float]] = []
    for i, row in enumerate(csv.reader(text.splitlines()), 1):
        cells = [c.strip() for c in row]
        if not any(cells) or cells[0].startswith("#"):
            continue
        if [c.lower() for c in cells] == ["tokens", "mfu"]:
            continue
        try:
            if len(cells) != 2:
                raise ValueError
            points.append((float(cells[0]), float(cells[1])))
        except ValueError:
            raise ValueError(f"--mfu-table {path}: line {i} {','.join(cells)!r} is not 'tokens,mfu' numbers") from None
    points.sort()
    try:
        return MfuTable(p.name, tuple(points))
    except ValueError as exc:
        raise ValueError(f"--mfu-table {path}: {str(exc).split(': ', 1)[-1]}") from None


def table_from(spec: str) -> MfuTable:
    """A built-in table's name (MFU_TABLES) or a CSV file's path."""
    return MFU_TABLES[spec] if spec in MFU_TABLES else read_table(spec)


def recompute_factor(recompute: bool) -> float:
    """A micro-batch's compute with activation recomputation over without: 4/3, or 1."""
    return RECOMPUTE_FACTOR if recompute else 1.0


def forward_share(recompute: bool) -> float:
    """The forward's share of a micro-batch's time: 1/3, or 1/4 with recomputation (the extra forward
    runs inside the backward)."""
    return FORWARD_SHARE / recompute_factor(recompute)


def describe_compute(topo: Topology, tokens: float, recompute: bool) -> str:
    """How a micro-batch's compute was found, for the command line's header."""
    table = topo.mfu_table
    where = f"the {table.name} table at {tokens:g} tokens" if table is not None else "one MFU for every shape"
    return f"6·Ψ·tokens at MFU {topo.mfu_at(tokens):.3g}, {where}" + (
        f", x{RECOMPUTE_FACTOR:.3g} for recomputation" if recompute else ""
    )
