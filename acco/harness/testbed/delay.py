"""The in-process side of the emulated link, configured once per worker process:

- delay mode (no namespaces): after each collective, sleep until it has taken as long as its bytes
  would take on a link of `rate_mbit` (what this rank sends in a ring collective), plus latency;
- netns mode: the kernel shapes the rate, and only the latency (no netem in this kernel) is a sleep.

Latency is charged once per sequential step of a ring collective ((N-1) steps for reduce-scatter
and all-gather, 2(N-1) for all-reduce), the α of the cost model's α-β model.

`after` is what a worker joining the link (`join`) registers as the
engine's collective hook (register_collective_hook): every collective of the flat methods, and
PyTorch DDP's bucket all-reduces and ZeRO step, is charged the same way."""

from __future__ import annotations

import time

_rate_bytes_per_s = 0.0  # 0: the rate is not emulated here (unlimited, or shaped by the kernel)
_latency_s = 0.0
charged_s = 0.0  # total sleep added in this process (for tests and reports)


def configure(rate_mbit: float, delay_ms: float) -> None:
    global _rate_bytes_per_s, _latency_s, charged_s
    _rate_bytes_per_s = float(rate_mbit) * 1e6 / 8
    _latency_s = float(delay_ms) / 1e3
    charged_s = 0.0


def active() -> bool:
    return _rate_bytes_per_s > 0 or _latency_s > 0


def ring_bytes(kind: str, buffer_bytes: int, world: int) -> tuple[float, int]:
    """(bytes one rank sends, sequential steps) of a ring collective over a buffer of `buffer_bytes`."""
    if world <= 1:
        return 0.0, 0
    share = (world - 1) / world * buffer_bytes
    if kind == "all_reduce":
        return 2 * share, 2 * (world - 1)
    if kind in ("reduce_scatter", "all_gather"):
        return share, world - 1
    raise ValueError(f"unknown collective {kind!r}")


def target_s(kind: str, buffer_bytes: int, world: int) -> float:
    sent, steps = ring_bytes(kind, buffer_bytes, world)
    return (sent / _rate_bytes_per_s if _rate_bytes_per_s > 0 else 0.0) + steps * _latency_s


def after(kind: str, buffer_bytes: int, world: int, started: float) -> None:
    """Called right after a collective that started at time.perf_counter() == `started`."""
    global charged_s
    if not active() or world <= 1:
        return
    left = target_s(kind, buffer_bytes, world) - (time.perf_counter() - started)
    if left > 0:
        time.sleep(left)
        charged_s += left
