"""Groups of runs and their comparison by the report's rule: a method's runs over seeds (`Group`), its
per-seed numbers, A against B paired by seed at the planned looks of analysis/stats.py, and the
one-line description of what a group ran that every section prints beside its verdicts."""

from __future__ import annotations

from typing import Any

import numpy as np

from analysis.claims import METRICS, paired_values, runs_by_seed
from analysis.load import BASELINE, Run, run_length_of
from analysis.measures import final_loss
from analysis.render import MissingRuns
from analysis.stats import DEFAULT_DESIGN, Design, Look, PairedGap, Verdict, relative_gaps, sequential


class Group:
    """The runs of one method/setting (over seeds): mean, min and max of a per-run number."""

    def __init__(self, label: str, runs: list[Run]):
        self.label, self.runs = label, runs

    def values(self, fn) -> np.ndarray:
        return np.array([fn(r) for r in self.runs], dtype=float)

    def mean(self, fn) -> float:
        v = self.values(fn)
        return float(np.nanmean(v)) if len(v) else float("nan")

    def cell(self, fn, fmt: str = ".3f") -> str:
        v = self.values(fn)
        if not len(v):
            return "–"
        if len(v) == 1:
            return format(v[0], fmt)
        return f"{np.nanmean(v):{fmt}} [{np.nanmin(v):{fmt}}–{np.nanmax(v):{fmt}}]"


def pick(runs: list[Run], **match) -> list[Run]:
    return [r for r in runs if all(r.info.get(k) == v for k, v in match.items())]


def values_by_seed(group: Group, fn) -> dict[int, float]:
    """seed -> fn(run) for a group's runs (one run per seed: analysis/claims.py runs_by_seed refuses two)."""
    return {seed: float(fn(run)) for seed, run in runs_by_seed(group.runs, group.label).items()}


def compare_look(
    a: Group, b: Group, metric: str = "final_loss", design: Design = DEFAULT_DESIGN, tests: str = "size"
) -> Look:
    """A against B on one of analysis/claims.py's METRICS by the report's rule (analysis/stats.py):
    paired by seed at equal samples, the planned looks of `design`, the metric's margin from B's runs."""
    if not a.runs or not b.runs:
        raise MissingRuns(f"no completed {a.label if not a.runs else b.label} runs")
    ra, rb = runs_by_seed(a.runs, a.label), runs_by_seed(b.runs, b.label)
    va, vb = paired_values(metric, ra, rb)
    m = METRICS[metric]
    return sequential(
        relative_gaps(va, vb), design, lambda seeds: m.margin([rb[s] for s in seeds]), tests, m.higher_is_better
    )


def compare(a: Group, b: Group, fn=final_loss, design: Design = DEFAULT_DESIGN) -> tuple[Verdict, PairedGap]:
    """compare_look on the final loss (`fn` is kept for the callers' readability: final_loss only)."""
    if fn is not final_loss:
        raise ValueError("compare reads the final loss; use compare_look for another metric")
    look = compare_look(a, b, "final_loss", design)
    return look.verdict, look.gap


def network_of(runs: list[Run]) -> str:
    """The runs' links: 'loopback (no shaping)' or '<mode> <rate> Mbit/s', each once."""
    modes = set()
    for r in runs:
        link = r.summary.link or {}
        if link.get("mode") in (None, "none"):
            modes.add("loopback (no shaping)")
        else:
            modes.add(f"{link['mode']} {link.get('rate_mbit')} Mbit/s")
    return ", ".join(sorted(modes)) or "–"


def baseline_of(runs: list[Run]) -> str:
    """Which DDP the wall-clock comparisons use (issue 13: gloo's all-reduce is slower than the
    minimal bytes a reduce-scatter + all-gather move, so the hook matters on a shaped link)."""
    kinds = set()
    for r in runs:
        method = r.config.get("method") or {}
        if method.get("name") != BASELINE:
            continue
        if method.get("impl", "torch") == "flat":
            kinds.add("our flat ZeRO-1 (reduce-scatter + all-gather)")
        elif method.get("comm_hook", "allreduce") == "reduce_scatter":
            kinds.add("PyTorch DDP + ZeroRedundancyOptimizer, reduce-scatter + all-gather hook (minimal bytes)")
        else:
            kinds.add("PyTorch DDP + ZeroRedundancyOptimizer, its default all-reduce (gloo on CPU)")
    return "; DDP baseline: " + ", ".join(sorted(kinds)) if kinds else ""


def peak_lr(run: Run) -> float:
    """The run's peak learning rate (optim.lr); nan where its config has none."""
    return float((run.config.get("optim") or {}).get("lr") or "nan")


def describe_runs(runs: list[Run]) -> str:
    """One line on what a group of runs ran: model, data, workers, length, peak lr, seeds, network, DDP."""
    r = runs[0]
    cfg = r.config
    model = (cfg.get("model") or {}).get("name")
    data = (cfg.get("data") or {}).get("name")
    world_set: set[Any] = {x.info.get("world_size") for x in runs}
    seed_set: set[Any] = {x.info.get("seed") for x in runs}
    world, seeds = sorted(world_set), sorted(seed_set)
    lengths = sorted({run_length_of(x) for x in runs}, key=lambda t: (len(t), t))
    lrs = sorted({peak_lr(x) for x in runs})
    return (
        f"{len(runs)} runs; model {model}, data {data}, workers {world}, length {', '.join(lengths)}, "
        f"peak lr {', '.join(f'{v:g}' for v in lrs)}, seeds {seeds}; "
        f"network: {network_of(runs)}{baseline_of(runs)}"
    )
