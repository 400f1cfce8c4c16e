"""ACCO against the local-SGD family (experiment beyond_diloco): which method reaches a target loss
first, for a given link and memory budget?

Dynamics runs (link off, 5 paired seeds) give each method's loss against samples; timing runs (a
whole number of H steps, repeated: seeds 0, 1, 2, the seed changing only the numbers, not the work)
give its seconds per step on each link. Every run is deterministic, so a run's losses do not depend
on the link and a step's time not on the seed: the time to a target is the steps a seed's dynamics
run needs times the mean seconds per step of the timing runs on that link.

Two noises, both in the intervals: the seeds' steps to the target (the per-seed times' Student-t
interval) and the timing runs' seconds per step (the mean's relative standard error sd / (mean √k)
over its k repetitions). A method's time is steps × seconds per step, and its gap to DDP's
(steps_A t_A) / (steps_DDP t_DDP) − 1, so the timing part is the factor t_A / t_DDP, whose relative
standard error is √(se_A² + se_DDP²) with Welch–Satterthwaite's degrees of freedom; each part's 95 %
half-width (relative, its own t quantile) is added in quadrature to the other's, around the same
mean (first order in the relative errors). One measured timing run has no spread to carry: its
gaps get no interval and no verdict. Virtual-clock times are modelled, exact (no timing noise), and
ACCO's adaptive runs are timed end to end per seed (their timing noise is in the seeds' spread).

`dynamics(root, scale)`, `timing(root, scale)`, `memory(root, scale)` give the tables' rows;
`figure(...)` draws loss against samples, time to the target against the link's measured
communication/computation ratio, and the model state per rank of all six methods."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from acco.config.experiments import experiment_block
from acco.methods import METHODS
from analysis.comparisons import Group, compare, describe_runs, peak_lr, values_by_seed
from analysis.load import ACCO, OVERLAPPED_DDP, Run, clock_of, discover_runs, is_local, schedule_name, spec_of
from analysis.load import BASELINE as BASELINE_KEY
from analysis.measures import SMOOTH_STEPS, final_loss, train_loss_frame
from analysis.render import MissingRuns, finish_figure, plt
from analysis.stats import PairedGap, Verdict, decide, paired_gap

EXP = "beyond_diloco"
BASELINE = "DDP"
# the variants of the comparison: the DDPs, ACCO, the local methods
MAIN = (BASELINE_KEY, OVERLAPPED_DDP, ACCO, *(name for name, spec in METHODS.items() if spec.local))
# the flat DDP whose reduce-scatter overlaps its last backward (issue 40): timing runs only, its
# updates being DDP's (bit for bit on 2 ranks), so its steps to a target are DDP's dynamics runs'
OVERLAPPED = "DDP (overlapped)"
PAPER_OUTER = (0.7, 0.9)  # DiLoCo's outer lr and Nesterov momentum (its paper's, for H ≈ 500)
STATE_KEYS = ("param_bytes", "grad_bytes", "comm_buffer_bytes", "optimizer_state_bytes")


def rate_of(run: Run) -> float:
    return float((run.config.get("link") or {}).get("rate_mbit") or 0.0)


def outer_of(run: Run) -> tuple[float, float]:
    """A local method's outer learning rate and momentum (a run from before they were set: the paper's)."""
    method = run.config.get("method") or {}
    return float(method.get("outer_lr", PAPER_OUTER[0])), float(method.get("outer_momentum", PAPER_OUTER[1]))


def outer_suffix(lr: float, momentum: float) -> str:
    return "" if (lr, momentum) == PAPER_OUTER else f" (outer lr {lr:g}, momentum {momentum:g})"


def variant(run: Run) -> str:
    m, method = run.method, run.config.get("method") or {}
    if is_local(spec_of(m)):
        return schedule_name(m, method) + outer_suffix(*outer_of(run))
    if m == ACCO and not adaptive(run):
        return "ACCO"
    return {BASELINE_KEY: BASELINE, OVERLAPPED_DDP: OVERLAPPED, ACCO: ADAPTIVE}.get(m, m.upper())


def timed_as(name: str) -> str:
    """The variant whose timing runs time `name`'s steps: a local method's outer settings change its
    updates, not its seconds per step (its timing runs are at the paper's)."""
    return name.split(" (outer ")[0]


ADAPTIVE = "ACCO adaptive"


def adaptive(run: Run) -> bool:
    """ACCO in its adaptive mode (train.deterministic=false): measured end to end on each link."""
    return run.method == ACCO and not (run.config.get("train") or {}).get("deterministic", False)


def _runs(root: str, scale: str) -> list[Run]:
    runs = discover_runs(root, EXP, scale)
    if not runs:
        raise MissingRuns(f"no completed {EXP} runs at scale {scale}")
    return runs


def dynamics_groups(runs: list[Run]) -> dict[str, Group]:
    """variant -> its dynamics runs (link off, the longest runs), DDP first."""
    longest = max(int(r.summary.steps_completed or 0) for r in runs)
    dyn = [r for r in runs if r.method in MAIN and rate_of(r) == 0 and int(r.summary.steps_completed or 0) == longest]
    names = sorted({variant(r) for r in dyn}, key=lambda v: (v != BASELINE, v))
    return {v: Group(v, [r for r in dyn if variant(r) == v]) for v in names}


def steps_to(run: Run, target: float) -> float:
    """The first step at which the training loss's SMOOTH_STEPS-step rolling mean is <= target
    (nan: never)."""
    m = train_loss_frame(run)
    smooth = m["smooth_loss"].to_numpy(float)
    hit = np.flatnonzero(smooth <= target)
    if len(hit):
        return float(m["step"].iloc[hit[0]])
    # a run whose final loss (the mean of its last TAIL of steps) is the target reaches it by its
    # last step, even where no SMOOTH_STEPS-step window of a noisy tail is that low
    return float(m["step"].iloc[-1]) if len(m) and final_loss(run) <= target else float("nan")


def targets(groups: dict[str, Group], kind: str = "common") -> dict[int, float]:
    """Per seed, the target loss. "common": the worst of the methods' final losses, which every
    method reaches; "baseline": DDP's own final loss, the harder one (a method that ends above it
    does not reach it)."""
    finals = {v: values_by_seed(g, final_loss) for v, g in groups.items()}
    if kind == "baseline":
        return dict(sorted(finals[BASELINE].items()))
    seeds = set.intersection(*(set(f) for f in finals.values()))
    return {s: max(f[s] for f in finals.values()) for s in sorted(seeds)}


TARGETS = {
    "common": "the worst of the methods' final losses (every method reaches it)",
    "baseline": "DDP's final loss (harder: a method ending above it does not reach it)",
}


def dynamics(root: str, scale: str = "cpu") -> list[dict]:
    groups = dynamics_groups(_runs(root, scale))
    if BASELINE not in groups:
        raise MissingRuns(f"no {BASELINE} dynamics runs in {EXP}")
    target = targets(groups)
    out = []
    for name, g in groups.items():
        row = {
            "variant": name,
            "n": len(g.runs),
            "final": g.mean(final_loss),
            "final_cell": g.cell(final_loss),
            "steps_to_target": float(np.nanmean([steps_to(r, target[s]) for s, r in _seeded(g) if s in target])),
            "spread_pct": _spread(g),
        }
        if name != BASELINE:
            row["verdict"], row["gap"] = compare(g, groups[BASELINE], final_loss)
        out.append(row)
    return out


# -- DDP's and ACCO's learning rate, by the rule written before the runs -------------------------
LR_NAMES = {BASELINE_KEY: BASELINE, ACCO: "ACCO"}


def lr_choice(scale: str = "cpu") -> dict:
    """The rule (conf/experiment_info/beyond_diloco.yaml lr_choice): where its grid runs are, which
    methods, the grid."""
    return dict(experiment_block(EXP, scale).get("lr_choice") or {})


def lr_grid(root: str, scale: str = "cpu") -> dict[str, dict[float, tuple[float, list[int]]]]:
    """Per method of the rule (ddp, acco), per peak rate of its grid runs: the mean final training
    loss over the tuning seeds, and the seeds."""
    choice = lr_choice(scale)
    if not choice:
        return {}
    methods = list(choice.get("methods") or [])
    runs = [r for r in discover_runs(root, choice["from"], scale) if r.method in methods]
    out: dict[str, dict[float, tuple[float, list[int]]]] = {}
    for m in methods:
        mine = [r for r in runs if r.method == m]
        for lr in sorted({peak_lr(r) for r in mine}):
            at = [r for r in mine if peak_lr(r) == lr]
            seeds = sorted(int(r.info["seed"]) for r in at)
            out.setdefault(m, {})[lr] = (float(np.mean([final_loss(r) for r in at])), seeds)
    return out


def lr_picks(grid: dict[str, dict[float, tuple[float, list[int]]]]) -> dict[str, float]:
    """The rule's pick per method: the lowest mean final loss; equal to 4 decimals, the smaller rate."""
    return {m: min(rates, key=lambda lr: (round(rates[lr][0], 4), lr)) for m, rates in grid.items() if rates}


def lr_choice_lines(root: str, scale: str, runs: list[Run]) -> list[str]:
    """The rule, its grid's means, its pick per method, and whether this experiment's runs of that
    method (its dynamics runs, and ACCO's adaptive runs) use it."""
    choice = lr_choice(scale)
    if not choice:
        return []
    grid = lr_grid(root, scale)
    head = f"- Learning rates of DDP and ACCO, by the rule written before their runs (`lr_choice`): {choice['rule']}"
    if not grid:
        return [f"{head} — no {choice['from']} runs of theirs here to apply it to."]
    picks = lr_picks(grid)
    groups = dynamics_groups(runs)
    parts = []
    for m, rates in grid.items():
        listed = ", ".join(
            f"{lr:g}: {mean:.4f} (seeds {', '.join(map(str, seeds))})" for lr, (mean, seeds) in rates.items()
        )
        name = LR_NAMES.get(m, m)
        used = {name: sorted({peak_lr(r) for r in groups[name].runs}) if name in groups else []}
        if m == ACCO:
            used[ADAPTIVE] = sorted({peak_lr(r) for r in runs if adaptive(r)})
        checks = []
        for who, lrs in used.items():
            if not lrs:
                continue
            ok = lrs == [picks[m]]
            rates_used = ", ".join(f"{x:g}" for x in lrs)
            checks.append(f"{who}'s runs use {rates_used}: " + ("the rule's pick" if ok else "**not the rule's pick**"))
        missing = [f"{lr:g}" for lr in choice.get("grid") or [] if float(lr) not in rates]
        provisional = f" (**the grid is incomplete**: no runs at {', '.join(missing)})" if missing else ""
        parts.append(
            f"{name}'s mean final loss per rate in {choice['from']}: {listed} → the rule picks {picks[m]:g}"
            f"{provisional}; " + ("; ".join(checks) or f"no {name} runs here")
        )
    local = sorted({peak_lr(r) for v, g in groups.items() if v not in LR_NAMES.values() for r in g.runs})
    return [
        f"{head}. " + ". ".join(parts) + ". The local methods' inner rate is not tuned by it: "
        f"{', '.join(f'{lr:g}' for lr in local) or 'none here'}, the rate their outer settings were chosen at "
        "(`outer_choice`)."
    ]


def _seeded(g: Group) -> list[tuple[int, Run]]:
    return [(int(r.info["seed"]), r) for r in g.runs]


def _spread(g: Group) -> float:
    v = g.values(final_loss)
    return 100.0 * float(np.nanmax(v) - np.nanmin(v)) / float(np.nanmean(v)) if len(v) > 1 else float("nan")


def seconds_to(run: Run, target: float) -> float:
    """Wall-clock seconds of an end-to-end run until its loss reaches the target (as steps_to)."""
    step = steps_to(run, target)
    if not math.isfinite(step):
        return float("nan")
    m = run.metrics().dropna(subset=["train_loss"]).sort_values("step")
    return float(m.loc[m["step"] == step, "wall_time_s"].iloc[0])


def seconds_per_step(run: Run) -> float:
    steps = int(run.summary.steps_completed or 0)
    return float(run.summary.total_wall_time_s or np.nan) / steps if steps else float("nan")


@dataclass(frozen=True)
class StepTime:
    """A variant's seconds per step on one link from its timing runs (the repetitions): their mean,
    standard deviation and number; `exact`: modelled (the virtual clock), without noise."""

    mean: float
    sd: float
    reps: int
    exact: bool = False

    @property
    def rel_se(self) -> float:
        """The mean's relative standard error: 0 where exact, nan from one measured run (its noise unknown)."""
        if self.exact:
            return 0.0
        if self.reps < 2 or not self.mean:
            return float("nan")
        return self.sd / self.mean / math.sqrt(self.reps)


def step_time(runs: list[Run], exact: bool = False) -> StepTime:
    vals = np.array([seconds_per_step(r) for r in runs], dtype=float)
    sd = float(vals.std(ddof=1)) if len(vals) > 1 else float("nan")
    return StepTime(float(vals.mean()), sd, len(vals), exact)


def _t(confidence: float, df: float) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.5 + confidence / 2, df))


def timing_half_width(*times: StepTime, confidence: float = 0.95) -> float:
    """The relative half-width the timing runs give a product or ratio of their means: √(Σ se²)
    times the t quantile at Welch–Satterthwaite's degrees of freedom (0: all exact; nan: a side
    measured once)."""
    parts = [(t.rel_se, t.reps - 1) for t in times if not t.exact]
    if any(not math.isfinite(se) for se, _ in parts):
        return float("nan")
    parts = [(se, df) for se, df in parts if se > 0]
    if not parts:
        return 0.0
    u2 = sum(se**2 for se, _ in parts)
    df = u2**2 / sum(se**4 / df for se, df in parts)
    return _t(confidence, df) * math.sqrt(u2)


def with_timing_noise(gap: PairedGap, *times: StepTime) -> PairedGap:
    """A paired gap of times (in %) over the seeds, its interval widened by the timing runs' noise
    (timing_half_width) in quadrature, on the factor 1 + gap / 100; infinite where that noise is
    unknown."""
    h_t = timing_half_width(*times, confidence=gap.confidence)
    if h_t == 0.0 or not gap.n:
        return gap
    factor = 1.0 + gap.mean_pct / 100.0
    h_s = (gap.hi_pct - gap.mean_pct) / 100.0 / factor
    h = math.hypot(h_s, h_t) if math.isfinite(h_t) else math.inf
    return dataclasses.replace(gap, lo_pct=100.0 * (factor * (1 - h) - 1), hi_pct=100.0 * (factor * (1 + h) - 1))


def link_key(run: Run) -> tuple[float, str]:
    """(emulated link rate in Mbit/s, 0 for none; layout): what a timing run's step time depends on."""
    return rate_of(run), str(run.info.get("layout"))


def link_label(link: tuple[float, str], layouts: set[str]) -> str:
    rate, layout = link
    if rate:
        return f"{rate:g} Mbit/s"
    return layout if len(layouts) > 1 else "link off"


def timing(root: str, scale: str = "cpu", target: str = "common", clock: str = "real") -> list[dict]:
    """One row per link (an emulated rate, or at the paper scale a layout; the first row is the
    dynamics runs' own setting, the reference): DDP's measured communication/computation ratio
    against the reference, and per method its seconds per step (the mean of its timing runs, their
    sd and number) and time to the target (mean over the seeds that reach it, 95 % interval with the
    timing runs' noise: the module's docstring), its paired gap to DDP's time and the verdict;
    `fastest`: the method with the lowest mean time among those reaching the target on every seed.
    A local method at outer settings other than the paper's is timed by the paper settings' timing
    runs on every link, the reference too (the outer step changes the updates, not the seconds per
    step). `clock="virtual"`: the seconds per step of the timing runs on the virtual clock (modelled,
    the link model's; exact, so the intervals hold the seeds' steps to the target only), the steps
    from the same (real-clock, deterministic) dynamics runs: their losses do not depend on the clock."""
    runs = _runs(root, scale)
    groups = dynamics_groups(runs)
    goal = targets(groups, target)
    steps = {v: {s: steps_to(r, goal[s]) for s, r in _seeded(g) if s in goal} for v, g in groups.items()}
    longest = max(int(r.summary.steps_completed or 0) for r in runs)
    timed = runs if clock == "real" else discover_runs(root, EXP, scale, clock=clock)
    exact = clock != "real"
    short = [r for r in timed if r.method in MAIN and not adaptive(r) and int(r.summary.steps_completed or 0) < longest]
    measured = [r for r in timed if adaptive(r)]  # end to end: each seed's own time to the target

    def paces(link: tuple[float, str]) -> dict[str, StepTime]:
        at = [r for r in short if link_key(r) == link]
        return {v: step_time([r for r in at if variant(r) == v], exact) for v in sorted({variant(r) for r in at})}

    reference = (0.0, str(next(iter(groups.values())).runs[0].info.get("layout")))
    # the reference: the timing runs' own (measured beside the others; for a local method at other
    # outer settings the paper settings', as on every other link), else the dynamics runs' (on the
    # virtual clock only the timing runs': the dynamics runs' times are measured ones)
    timed_here = paces(reference)
    base_step: dict[str, StepTime] = {}
    if clock == "real":
        base_step = {
            v: step_time(g.runs) for v, g in groups.items() if v not in timed_here and timed_as(v) not in timed_here
        }
    base_step.update(timed_here)
    links = {link_key(r) for r in short} - {reference}
    if BASELINE not in base_step:
        raise MissingRuns(f"no {EXP} {BASELINE} timing run on the reference link ({clock} clock)")
    if not links:
        raise MissingRuns(f"no {EXP} timing runs on a link (or layout) other than the dynamics runs'")
    layouts = {layout for _, layout in links | {reference}}
    order = sorted(links, key=lambda k: (k[0] == 0, -k[0], k[1]))
    out = []
    for link in [reference, *order]:
        per = paces(link)
        if link == reference:
            per = {**base_step, **per}
        if BASELINE not in per:
            continue
        for v in steps:  # a local method at other outer settings: the paper settings' seconds per step
            if v not in per and timed_as(v) in per:
                per[v] = per[timed_as(v)]
        ratio = (per[BASELINE].mean - base_step[BASELINE].mean) / base_step[BASELINE].mean
        times = {v: {s: n * per[v].mean for s, n in steps[v].items()} for v in per if v in steps}
        if OVERLAPPED in per:  # DDP's updates, its own seconds per step
            times[OVERLAPPED] = {s: n * per[OVERLAPPED].mean for s, n in steps[BASELINE].items()}
        noise = {v: per[v] for v in times}  # what each time's timing part carries
        own = {int(r.info["seed"]): r for r in measured if link_key(r) == link and int(r.info["seed"]) in goal}
        if own:
            per[ADAPTIVE] = step_time(list(own.values()))
            times[ADAPTIVE] = {s: seconds_to(r, goal[s]) for s, r in own.items()}
            noise[ADAPTIVE] = StepTime(per[ADAPTIVE].mean, 0.0, len(own), exact=True)  # in its seeds' spread
        methods = {}
        for v, t in times.items():
            vals = np.array(list(t.values()), dtype=float)
            reached = int(np.isfinite(vals).sum())
            entry: dict = {
                "s_per_step": per[v].mean,
                "s_per_step_sd": per[v].sd,
                "timing_runs": per[v].reps,
                "time": float(np.nanmean(vals)) if reached else float("nan"),
                "ci": _interval(vals, noise[v]),
                "reached": reached,
                "seeds": len(vals),
            }
            if v != BASELINE and reached == len(vals):  # a method missing the target on a seed has no gap
                gap = with_timing_noise(paired_gap(t, times[BASELINE]), noise[v], noise[BASELINE])
                entry["gap"], entry["verdict"] = gap, _decide(gap)
                if OVERLAPPED in times and v != OVERLAPPED:  # against the DDP at its best
                    best = with_timing_noise(paired_gap(t, times[OVERLAPPED]), noise[v], noise[OVERLAPPED])
                    entry["gap_overlapped"], entry["verdict_overlapped"] = best, _decide(best)
            methods[v] = entry
        everywhere = [v for v, e in methods.items() if _everywhere(e)]
        fastest = min(everywhere, key=lambda v: methods[v]["time"]) if everywhere else "none"
        out.append(
            {
                "link": link_label(link, layouts),
                "rate_mbit": link[0],
                "layout": link[1],
                "reference": link == reference,
                "ratio": ratio,
                "methods": methods,
                "fastest": fastest,
            }
        )
    return out


def _decide(gap: PairedGap) -> Verdict:
    """decide(), except that a gap whose timing noise is unknown (one measured timing run: an
    infinite interval over enough seeds) is inconclusive, not short of seeds."""
    if gap.n >= 2 and math.isinf(gap.lo_pct) and math.isinf(gap.hi_pct):
        return Verdict.INCONCLUSIVE
    return decide(gap)


def _interval(vals: np.ndarray, pace: StepTime | None = None) -> tuple[float, float]:
    """The seeds' 95 % Student-t interval of the mean time, widened by the timing runs' noise of
    `pace` in quadrature (relative half-widths; nan where that noise is unknown)."""
    vals = vals[np.isfinite(vals)]
    if len(vals) < 2:
        return (float("nan"), float("nan"))
    mean = float(vals.mean())
    half = _t(0.95, len(vals) - 1) * float(vals.std(ddof=1)) / math.sqrt(len(vals))
    h_t = timing_half_width(pace) if pace is not None else 0.0
    if not math.isfinite(h_t):
        return (float("nan"), float("nan"))
    half = mean * math.hypot(half / mean, h_t) if mean else half
    return (mean - half, mean + half)


def memory(root: str, scale: str = "cpu") -> list[dict]:
    """Per method (all six, one run each, link off): the model state per rank as summary.json
    reports it, and the rank's peak RSS during training. The run by a rule that does not depend on
    folder names: the most steps, the real clock before the virtual one, the lowest seed."""
    runs = [r for r in _runs(root, scale) if rate_of(r) == 0]
    out, seen = [], set()

    def rule(r: Run) -> tuple:
        steps = -int(r.summary.steps_completed or 0)
        return (r.method, steps, clock_of(r.config) == "virtual", int(r.config.get("seed") or 0), r.name)

    for r in sorted(runs, key=rule):
        v = variant(r)
        if v in seen or not r.summary.ranks():
            continue
        seen.add(v)
        rank = max(r.summary.ranks(), key=lambda p: sum(p.get(k) or 0 for k in STATE_KEYS))
        out.append(
            {
                "variant": v,
                "method": r.method,
                **{k: int(rank.get(k) or 0) for k in STATE_KEYS},
                "state": sum(int(rank.get(k) or 0) for k in STATE_KEYS),
                "peak_rss": int(rank.get("peak_rss_bytes") or 0),
            }
        )
    order = list(METHODS)  # the suite's order
    return sorted(out, key=lambda row: (order.index(row["method"]) if row["method"] in order else 9, row["variant"]))


def _smoothed(run: Run) -> tuple[np.ndarray, np.ndarray]:
    """(step, training loss's SMOOTH_STEPS-step rolling mean) of a run."""
    m = train_loss_frame(run)
    return m["step"].to_numpy(float), m["smooth_loss"].to_numpy(float)


def _clock(run: Run) -> np.ndarray:
    return train_loss_frame(run)["wall_time_s"].to_numpy(float)


def _everywhere(entry: dict) -> bool:
    """Reached the target on every seed (a mean over the seeds that did would flatter it)."""
    return entry["reached"] == entry["seeds"] > 0


def _ratio(row: dict) -> str:
    return "reference" if row["reference"] else f"{row['ratio']:.2g}"


# -- the figure ---------------------------------------------------------------------------------
COLORS = {"DDP": "C0", "ACCO": "C3", ADAPTIVE: "C1"}


def _color(v: str, i: int) -> str:
    return COLORS.get(v, f"C{4 + i}")


def figure(root: str, scale: str = "cpu", save: bool = True):
    runs = _runs(root, scale)
    groups = dynamics_groups(runs)
    fig, (left, clock, mid, right) = plt.subplots(1, 4, figsize=(21, 4.6))
    for i, (v, g) in enumerate(groups.items()):
        curves = []
        for r in g.runs:
            m = train_loss_frame(r)
            curves.append((m["samples"].to_numpy(float), m["smooth_loss"].to_numpy(float)))
        n = min(len(c[0]) for c in curves)
        x, ys = curves[0][0][:n], np.array([c[1][:n] for c in curves])
        left.plot(x, ys.mean(0), color=_color(v, i), label=f"{v} (n={len(g.runs)})")
        left.fill_between(x, ys.min(0), ys.max(0), color=_color(v, i), alpha=0.15)
    left.set_xlabel("samples")
    left.set_ylabel(f"training loss ({SMOOTH_STEPS}-step mean; band: seeds' min–max)")
    left.set_title("dynamics: loss against samples (link off)")
    left.legend(fontsize=8)
    rows = timing(root, scale)
    slowest = rows[-1]
    for i, (v, g) in enumerate(groups.items()):
        e = slowest["methods"].get(v)
        if e is None:
            continue
        curves = [_smoothed(r) for r in g.runs]
        n = min(len(c[0]) for c in curves)
        steps, ys = curves[0][0][:n], np.array([c[1][:n] for c in curves])
        clock.plot(steps * e["s_per_step"], ys.mean(0), color=_color(v, i), label=v)
    own = [r for r in runs if adaptive(r) and link_key(r) == (slowest["rate_mbit"], slowest["layout"])]
    if own:  # measured end to end: each seed's loss against its own clock
        curves = [(_clock(r), _smoothed(r)[1]) for r in own]
        n = min(len(c[0]) for c in curves)
        ts, ys = np.array([c[0][:n] for c in curves]), np.array([c[1][:n] for c in curves])
        clock.plot(ts.mean(0), ys.mean(0), color=_color(ADAPTIVE, 0), label=f"{ADAPTIVE} (measured)")
    clock.set_xscale("log")
    clock.set_xlabel(f"seconds on {slowest['link']} (steps × its measured seconds per step)")
    clock.set_ylabel("training loss (mean over seeds)")
    clock.set_title(f"loss against wall-clock, slowest link (ratio {_ratio(slowest)})")
    clock.legend(fontsize=8)
    at = np.arange(len(rows))  # the links in order: the reference, then slower and slower
    for i, v in enumerate([*groups, ADAPTIVE]):
        pts = [(k, r["methods"][v]) for k, r in enumerate(rows) if v in r["methods"] and _everywhere(r["methods"][v])]
        if not pts:
            continue
        xs = np.array([at[p[0]] for p in pts])
        ys = np.array([p[1]["time"] for p in pts])
        lo = np.array([p[1]["ci"][0] for p in pts])
        hi = np.array([p[1]["ci"][1] for p in pts])
        mid.errorbar(xs, ys, yerr=[ys - lo, hi - ys], fmt="o-", color=_color(v, i), capsize=3, label=v)
    mid.set_yscale("log")
    mid.set_xlabel("link (DDP's measured communication / computation per step)")
    mid.set_ylabel("seconds to the target loss (mean, 95 % CI over seeds)")
    mid.set_title("which method reaches the target first?")
    mid.set_xticks(at)
    mid.set_xticklabels([f"{r['link']}\n({_ratio(r)})" for r in rows], fontsize=8)
    mid.minorticks_off()
    mid.legend(fontsize=8)
    mem = memory(root, scale)
    names = [m["variant"].replace("Streaming DiLoCo", "Str. DiLoCo").replace(" F=", "\nF=") for m in mem]
    bottom = np.zeros(len(mem))
    for key, label in zip(STATE_KEYS, ("parameters", "gradients", "comm. buffer", "optimizer state")):
        vals = np.array([m[key] for m in mem], dtype=float) / 1e6
        right.bar(names, vals, bottom=bottom, label=label)
        bottom += vals
    right.set_ylabel("model state per rank (MB)")
    right.set_title("memory per rank (summary.json)")
    right.tick_params(axis="x", labelsize=7, rotation=45)
    right.legend(fontsize=8)
    fig.suptitle("Beyond the paper — ACCO vs DiLoCo and Streaming DiLoCo (deterministic rounds, paired seeds)")
    fig.tight_layout()
    return finish_figure(fig, root, EXP, scale, save)


def _time_table(rows: list[dict], names: list[str]) -> list[str]:
    out = [
        "| link | comm/compute (DDP) | " + " | ".join(names) + " | first to the target |",
        "|---|---|" + "---|" * len(names) + "---|",
    ]
    for row in rows:
        cells = []
        for v in names:
            e = row["methods"].get(v)
            if e is None:
                cells.append("–")
                continue
            if not e["reached"]:
                cells.append(f"not reached ({e['s_per_step']:.2f} s/step)")
                continue
            cell = f"{e['time']:.1f} s ({e['s_per_step']:.2f} s/step{_spread_of(e)})"
            if e["reached"] < e["seeds"]:
                cell += f"<br>reached on {e['reached']} of {e['seeds']} seeds"
            if "gap" in e:
                cell += f"<br>{_gap_cell(e['gap'])} **{e['verdict'].value}**"
            if "gap_overlapped" in e:
                cell += f"<br>vs {OVERLAPPED}: {_gap_cell(e['gap_overlapped'])} **{e['verdict_overlapped'].value}**"
            cells.append(cell)
        out.append(f"| {row['link']} | {_ratio(row)} | " + " | ".join(cells) + f" | {row['fastest']} |")
    return out


def _timing_summary(rows: list[dict]) -> str:
    """How many timing runs each method and link has, and their spread, read off the rows."""
    entries = [e for row in rows for v, e in row["methods"].items() if v != ADAPTIVE]
    counts = sorted({int(e.get("timing_runs", 1)) for e in entries})
    sds = [
        100 * e["s_per_step_sd"] / e["s_per_step"]
        for e in entries
        if e.get("timing_runs", 1) > 1 and math.isfinite(e.get("s_per_step_sd", float("nan")))
    ]
    n = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]} to {counts[-1]}"
    text = f"{n} run(s) per method and link"
    if sds:
        text += f"; their sd {float(np.median(sds)):.1f} % of the mean (median), at most {max(sds):.1f} %"
    return text


def _spread_of(e: dict) -> str:
    """', sd 4 % of 3 runs': the timing runs' spread, where there is one (measured, repeated)."""
    sd, k = e.get("s_per_step_sd", float("nan")), e.get("timing_runs", 1)
    return f", sd {100 * sd / e['s_per_step']:.0f} % of {k} runs" if k > 1 and math.isfinite(sd) else ""


def _gap_cell(g: PairedGap) -> str:
    if math.isinf(g.lo_pct) and math.isinf(g.hi_pct) and g.n > 1:
        return f"{g.mean_pct:+.0f} % (no interval: 1 timing run)"
    return f"{g.mean_pct:+.0f} % [{g.lo_pct:+.0f}, {g.hi_pct:+.0f}]"


def _adaptive_lines(runs: list[Run]) -> list[str]:
    """Where ACCO's adaptive runs end on each link: fewer, larger steps for the same samples."""
    own = [r for r in runs if adaptive(r)]
    if not own:
        return []
    parts = []
    for link in sorted({link_key(r) for r in own}, key=lambda k: (-k[0], k[1])):
        at = [r for r in own if link_key(r) == link]
        steps = np.mean([int(r.summary.steps_completed or 0) for r in at])
        parts.append(
            f"{link_label(link, {link[1]})}: final loss {np.mean([final_loss(r) for r in at]):.2f} "
            f"after {steps:.0f} steps (n = {len(at)})"
        )
    return [f"- {ADAPTIVE}, the samples of DDP's dynamics runs, by link: " + "; ".join(parts) + "."]


def section(root: str, scale: str) -> list[str]:
    """The report's section: the question, the method, the three tables, the verdicts."""
    runs = _runs(root, scale)
    dyn = dynamics(root, scale)
    lines = [
        "Question: for a given bandwidth and memory budget, which method reaches a target loss first? "
        f"Every run but {ADAPTIVE}'s is deterministic: DDP (flat engine: reduce-scatter + all-gather), "
        "DiLoCo and Streaming "
        "DiLoCo with 2 micro-batches per worker per step, ACCO with 1 per round (2 rounds per step), so every "
        "method sees the same samples per step. Dynamics runs (link off) give loss against samples over "
        "paired seeds; timing runs (a whole number of H steps, repeated) give seconds per step on each link. "
        "A run's losses do not depend on the link and a step's time not on the seed, so the time to the "
        "target = steps to it (per seed) × seconds per step (per link): a composition of measurements, not "
        f"one end-to-end run per link and seed ({ADAPTIVE} excepted: see below). Target, per seed: the worst "
        "of the methods' final losses "
        f"(reached by all), on the {SMOOTH_STEPS}-step mean of the training loss.",
        "",
        f"Setting: {describe_runs([r for r in runs if rate_of(r) == 0])}.",
        "",
        "**Dynamics** (loss against samples, link off):",
        "",
        "| method | final loss, mean [min–max] | seed spread | steps to the target (mean) | vs DDP, paired | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for r in dyn:
        gap = r["gap"].describe() if "gap" in r else "–"
        verdict = f"**{r['verdict'].value}**" if "verdict" in r else "(baseline)"
        lines.append(
            f"| {r['variant']} | {r['final_cell']} | {r['spread_pct']:.1f} % | {r['steps_to_target']:.0f} | "
            f"{gap} | {verdict} |"
        )
    lines += ["", *lr_choice_lines(root, scale, runs)]
    rows, hard = timing(root, scale), timing(root, scale, "baseline")
    names = [r["variant"] for r in dyn] + ([ADAPTIVE] if any(adaptive(r) for r in runs) else [])
    if any(r.method == OVERLAPPED_DDP for r in runs):  # the DDP at its best, beside the paper's
        names.insert(1, OVERLAPPED)
    lines += [
        "",
        "**Wall-clock** (seconds to the target; per link DDP's measured communication/computation ratio, "
        "(its seconds per step on the link − on the reference) / on the reference; seconds per step: the mean "
        f"of a method's short timing runs on the link ({_timing_summary(rows)}); gap and verdict: the method's "
        "time against DDP's, paired by seed, whose 95 % interval holds the seeds' steps to the target (Student "
        "t over the seeds) and the timing runs' noise (the relative standard error of the ratio of the two "
        "means of seconds per step, Welch–Satterthwaite's degrees of freedom), their half-widths added in "
        "quadrature; a gap resting on a single timing run has no interval and no verdict; "
        f"*vs {OVERLAPPED}*: the same against the DDP whose "
        "reduce-scatter overlaps its last backward, the baseline at its best, whose updates are DDP's, so its "
        "steps to the target are DDP's; a local method at outer settings other than the paper's is timed by "
        "the timing runs at the paper's on every link, the link off too: the outer step changes the updates, "
        "not the seconds per step):",
        "",
        *_time_table(rows, names),
        "",
        f"Harder target, per seed: {TARGETS['baseline']}. First to it, by link: "
        + "; ".join(f"{row['link']}: {row['fastest']}" for row in hard)
        + ".",
        "",
        *_time_table(hard, names),
    ]
    mem = memory(root, scale)
    lines += [
        "",
        "**Memory per rank** (model state as summary.json reports it, on "
        + "/".join(sorted({str(r.summary.device) for r in runs}))
        + "; formulas in docs/local-methods.md):",
        "",
        "| method | parameters | gradients | comm. buffer | optimizer state | model state | × DDP's | peak RSS |",
        "|---|---|---|---|---|---|---|---|",
    ]
    base = next((m["state"] for m in mem if m["method"] == BASELINE_KEY), float("nan"))
    for m in mem:
        mb = [f"{m[k] / 1e6:.2f} MB" for k in STATE_KEYS]
        lines.append(
            f"| {m['variant']} | " + " | ".join(mb) + f" | {m['state'] / 1e6:.2f} MB | {m['state'] / base:.2f} | "
            f"{m['peak_rss'] / 1e6:.0f} MB |"
        )
    fastest = {row["fastest"] for row in rows}
    undecided = [r for r in dyn if r.get("verdict") in (Verdict.INCONCLUSIVE, Verdict.MORE_SEEDS)]
    lines += [""]
    for r in undecided:  # what the interval hides: the seeds' own final losses
        per_seed = values_by_seed(dynamics_groups(runs)[r["variant"]], final_loss)
        lines.append(
            f"- {r['variant']} is {r['verdict'].value} against DDP at n = {r['gap'].n}; its final loss by seed: "
            + ", ".join(f"{s}: {v:.2f}" for s, v in sorted(per_seed.items()))
            + "."
        )
    lines += [
        "- First to the target, by link: "
        + "; ".join(f"{row['link']} (ratio {_ratio(row)}): {row['fastest']}" for row in rows)
        + ".",
        f"- {len(fastest)} different winner(s) over the links measured, for the target every method reaches; "
        "the harder target (DDP's final loss) is above.",
        *_adaptive_lines(runs),
        f"- {ADAPTIVE} (train.deterministic=false) keeps computing while a slow sync runs, so on a slow link it "
        "takes more samples per step rather than more time; its losses depend on the link, so it runs end to "
        "end on each link (the samples of DDP's dynamics runs) and its time to the target is read off its own "
        "loss against wall-clock, not composed. Its gap to DDP pairs a measured time with a composed one.",
    ]
    return lines


__all__ = ["dynamics", "timing", "memory", "figure", "section", "PairedGap", "Verdict"]
