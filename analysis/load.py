"""Discover the runs of a results folder and load them as tidy pandas DataFrames.

A run is a folder `<root>/<scale>/<exp>/<run_name>/` holding config.yaml, metrics.csv,
summary.json (and optionally trace.json); only runs whose summary says `status: completed` are
used, and where a folder holds runs of the experiment's run list, only those (a run of other
settings put there by hand, or by a version before sweeps had folders of their own, is left out
with a note: it would be read as one more seed of a group). Everything is read from the run
folder itself: the run's identity (method, seed, DPU warmup, accumulation, layout, workers,
heterogeneity) comes from its resolved config.yaml, never from the folder name.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pandas as pd
import yaml

from acco.config.experiments import SCALES, experiment_block, experiment_dir, in_run_list
from acco.methods import METHODS, MethodSpec, get, variants
from acco.runtime.files import METRIC_FIELDS
from acco.runtime.saved_config import load_yaml
from acco.runtime.summary import RunSummary, read_summary

METRIC_COLUMNS = METRIC_FIELDS  # the columns every run's metrics.csv has (acco/runtime/files.py)
RUN_COLUMNS = [
    "exp",
    "scale",
    "run",
    "method",
    "impl",
    "seed",
    "warmup",
    "accum",
    "layout",
    "world_size",
    "hetero",
    "steps",
    "deterministic",
    "device",
]
# a run's `method` key (run_info): its trainer method, or a variant the analysis groups apart, its own
# arm in claims and figures (the first whose settings the run's config holds)
RUN_VARIANTS = (variants.OVERLAPPED_DDP,)  # told apart from the paper's baseline, the sequential ddp
# the arms the comparisons name by their role
BASELINE = get("ddp").name  # the paper's baseline, DDP + ZeRO-1 (as the run's impl has it)
OVERLAPPED_DDP = variants.OVERLAPPED_DDP.key  # the same DDP, its reduction overlapping the last backward
DPU, WP = get("dpu").name, get("wp").name  # the delayed updates
ACCO = get("acco").name


def _read_yaml(path: str) -> dict:
    try:
        return load_yaml(path)  # libyaml's loader where there is one: the plan reads hundreds
    except (OSError, yaml.YAMLError):
        return {}


def _get(d: dict, dotted: str, default=None):
    for key in dotted.split("."):
        if not isinstance(d, dict) or key not in d:
            return default
        d = d[key]
    return d


def run_info(cfg: dict, summary: RunSummary | None = None) -> dict:
    """What identifies a run inside its experiment, from its resolved config (and summary)."""
    summary = summary or RunSummary()
    method = run_key(summary.method or _get(cfg, "method.name"), cfg)
    spec = spec_of(method)
    world = summary.world_size or cfg.get("world_size")
    layout = cfg.get("layout")
    if not layout and world:
        layout = f"1x{world}"
    warmup = _get(cfg, "method.warmup_steps") if reads(spec, "warmup_steps") else None
    slow = _get(cfg, "hetero.slow_rank")
    factor = _get(cfg, "hetero.factor", 1.0)
    hetero = f"rank{slow}x{float(factor):g}" if slow is not None and float(factor or 1.0) != 1.0 else "none"
    return {
        "method": method,
        "impl": _get(cfg, "method.impl") if reads(spec, "impl") else None,
        "seed": cfg.get("seed"),
        "warmup": warmup,
        "accum": summary.accum or _get(cfg, "train.accum"),
        "layout": str(layout) if layout else None,
        "world_size": int(world) if world else None,
        "hetero": hetero,
        # the local methods' inner steps per sync (DiLoCo H=8 vs H=32 in beyond_diloco)
        "sync_every": _get(cfg, "method.sync_every") if is_local(spec) else None,
        # and their outer optimizer (the paper's lr 0.7, momentum 0.9, or the settings outer_sweep chose)
        "outer_lr": _get(cfg, "method.outer_lr") if is_local(spec) else None,
        "outer_momentum": _get(cfg, "method.outer_momentum") if is_local(spec) else None,
        "steps": _get(cfg, "train.steps"),
        "deterministic": _get(cfg, "train.deterministic"),
        "device": summary.device or cfg.get("device"),
        # whose time wall_time_s is (acco/engine/virtual_clock.py): the machine's or the schedule's
        # modelled one, with the modelled sync's seconds that set its comm/compute ratio
        "clock": clock_of(cfg),
        "sync_s": _get(cfg, "clock.sync_s") if clock_of(cfg) == "virtual" else None,
    }


def run_key(method: str | None, cfg: dict) -> str | None:
    """A run's `method` key: the first of RUN_VARIANTS of its method whose settings its config holds,
    else the method's name."""
    for v in RUN_VARIANTS:
        if v.method == method and all(_get(cfg, path) == value for path, value in v.settings):
            return v.key
    return method


def spec_of(key: str | None) -> MethodSpec | None:
    """The trainer's spec of a run's `method` key (ddp_overlap: ddp's); None for a name the registry
    lacks (a run of a method defined elsewhere)."""
    name = next((v.method for v in RUN_VARIANTS if v.key == key), key)
    return METHODS.get(name) if isinstance(name, str) else None


def reads(spec: MethodSpec | None, setting: str) -> bool:
    """Whether the method reads `method.<setting>` (its config has it)."""
    return spec is not None and setting in spec.settings


def is_local(spec: MethodSpec | None) -> bool:
    return spec is not None and spec.local


# the settings a local method's schedule is named by, after its label (its outer optimizer changes
# its updates, not its rounds); a fragmented one's fragments and overlap too
SCHEDULE_SETTINGS = (("H", "sync_every"),)
FRAGMENT_SETTINGS = (("F", "fragments"), ("τ", "overlap_steps"))


def schedule_name(method: str, settings: dict) -> str:
    """A local method's schedule by name, from its `method` config block: `DiLoCo H=32`,
    `Streaming DiLoCo H=32 F=4 τ=1`."""
    spec = spec_of(method)
    named = SCHEDULE_SETTINGS + (FRAGMENT_SETTINGS if spec and spec.fragmented else ())
    return " ".join([method_label(method), *(f"{short}={settings[key]}" for short, key in named)])


def clock_of(cfg: dict) -> str:
    """'real' or 'virtual' (a config written before clock.mode existed ran on the real clock)."""
    return str(_get(cfg, "clock.mode") or "real")


TIMING_FILE = "timing.json"  # a run's span times, kept when its trace is slimmed away


@dataclass
class Run:
    path: str
    exp: str
    scale: str
    name: str
    config: dict
    summary: RunSummary
    _metrics: pd.DataFrame | None = field(default=None, repr=False)

    @property
    def info(self) -> dict:
        return {"exp": self.exp, "scale": self.scale, "run": self.name, **run_info(self.config, self.summary)}

    @property
    def method(self) -> str:
        return self.info["method"]

    @property
    def trace_path(self) -> str | None:
        path = os.path.join(self.path, "trace.json")
        return path if os.path.exists(path) else None

    def span_times(self) -> dict:
        """Median span times of the run's trace (acco/harness/bench/measure.py trace_times: micro-batch,
        sync, reduce-scatter, all-gather, per-round compute): from timing.json, which
        analysis/slim_results.py writes from the whole trace before it cuts or removes it, else from
        the whole trace; {} with neither (a trace cut to its first seconds has the start's medians,
        not the run's)."""
        path = os.path.join(self.path, TIMING_FILE)
        if os.path.exists(path):
            with open(path) as f:
                return json.load(f)
        if self.trace_path is None or trace_is_cut(self.trace_path):
            return {}
        from acco.harness.bench.measure import trace_times

        return trace_times(self.trace_path, int(self.info.get("accum") or 1))

    @property
    def experiment(self) -> dict:
        """The experiment block the run was made from (id, title, paper, the run list at its scale)."""
        return self.config.get("experiment") or {}

    def metrics(self) -> pd.DataFrame:
        if self._metrics is None:
            self._metrics = metrics_frame(os.path.join(self.path, "metrics.csv"))
        return self._metrics


def metrics_frame(path: str) -> pd.DataFrame:
    """metrics.csv with numeric columns (empty eval_loss / grad_norm cells become NaN)."""
    try:
        df = pd.read_csv(path)
    except (OSError, pd.errors.EmptyDataError):
        return pd.DataFrame(columns=METRIC_COLUMNS)
    for col in METRIC_COLUMNS:
        if col not in df:
            df[col] = float("nan")
        df[col] = pd.to_numeric(df[col], errors="coerce")
    return df


def discover_runs(
    root: str,
    exp: str | None = None,
    scale: str | None = None,
    completed_only: bool = True,
    clock: str | None = "real",
) -> list[Run]:
    """Every run folder `<root>/<scale>/<exp>/<name>/` with a summary.json (status completed unless
    `completed_only=False`), sorted by experiment, scale and name. `clock`: only the runs on that
    clock (real: measured wall-clock, the default, so modelled times never mix into measured
    ones; virtual: analysis/clock_report.py's) or, None, every run. Inside `loaded_once()` a folder
    is read once and the same question answered from memory."""
    key = (os.path.abspath(root), exp, scale, completed_only, clock)
    if _LOADED is not None and key in _LOADED.answers:
        return list(_LOADED.answers[key])
    runs: list[Run] = []
    for s in [scale] if scale else SCALES:
        sdir = os.path.join(root, s)
        if not os.path.isdir(sdir):
            continue
        for e in [exp] if exp else sorted(os.listdir(sdir)):
            edir = experiment_dir(root, s, e)
            if not os.path.isdir(edir):
                continue
            here = []
            for name in sorted(os.listdir(edir)):
                rdir = os.path.join(edir, name)
                run = _loaded_run(rdir, e, s, name)
                if run is None or (completed_only and not run.summary.completed):
                    continue
                here.append(run)
            runs += [r for r in of_the_run_list(here, edir) if clock is None or clock_of(r.config) == clock]
    runs = sorted(runs, key=lambda r: (r.exp, r.scale, r.name))
    if _LOADED is not None:
        _LOADED.answers[key] = list(runs)
    return runs


@dataclass
class _Loaded:
    """The runs read while `loaded_once()` is open: one Run per folder (its metrics read once), and
    each discover_runs answer."""

    runs: dict[str, Run | None] = field(default_factory=dict)
    answers: dict[tuple, list[Run]] = field(default_factory=dict)


_LOADED: _Loaded | None = None


@contextmanager
def loaded_once() -> Iterator[None]:
    """Every section of the report and every figure reads the results folder's runs once: inside this
    block a run folder is parsed once (config, summary, metrics.csv) and shared by every reader.
    Outside it nothing is kept, so a folder that gains runs is read afresh."""
    global _LOADED
    if _LOADED is not None:  # nested: the outer block's runs
        yield
        return
    _LOADED = _Loaded()
    try:
        yield
    finally:
        _LOADED = None


def _loaded_run(path: str, exp: str, scale: str, name: str) -> Run | None:
    """The run in `path` (None: no folder, or no summary.json in it), parsed once inside loaded_once()."""
    if _LOADED is not None and path in _LOADED.runs:
        return _LOADED.runs[path]
    summary = read_summary(path) if os.path.isdir(path) else None
    run = (
        None if summary is None else Run(path, exp, scale, name, _read_yaml(os.path.join(path, "config.yaml")), summary)
    )
    if _LOADED is not None:
        _LOADED.runs[path] = run
    return run


_NOTED: set[str] = set()  # folders whose left-out runs were named once already


def of_the_run_list(runs: list[Run], folder: str) -> list[Run]:
    """The runs of an experiment's folder that its run list (as conf/ composes it now) names, seeds
    added by reproduce.py included; all of them when it names none (a results root of runs made
    with other settings, test fixtures). The others are named once on stderr."""
    if not runs:
        return runs
    block = experiment_block(runs[0].exp, runs[0].scale) if runs[0].exp and runs[0].scale else {}
    if not block.get("runs"):
        return runs
    listed = [r for r in runs if in_run_list(r.name, block)]
    if not listed:
        return runs
    extra = [r.name for r in runs if r not in listed]
    if extra and folder not in _NOTED:
        _NOTED.add(folder)
        shown = ", ".join(extra[:3]) + (f" and {len(extra) - 3} more" if len(extra) > 3 else "")
        print(
            f"analysis: {folder}: {len(extra)} run(s) not in the experiment's run list left out ({shown}); "
            "move them out (a sweep belongs in results/sweeps/)",
            file=sys.stderr,
        )
    return listed


def experiments(root: str, scale: str = "cpu") -> list[str]:
    """Experiment ids with at least one completed run at this scale."""
    return sorted({r.exp for r in discover_runs(root, scale=scale)})


def load_experiment(root: str, exp: str, scale: str = "cpu", runs: list[Run] | None = None) -> pd.DataFrame:
    """One row per metrics row of every completed run of `exp`, with the run's columns
    (exp, scale, run, method, impl, seed, warmup, accum, layout, world_size, hetero, steps, ...)."""
    runs = discover_runs(root, exp, scale) if runs is None else runs
    frames = []
    for run in runs:
        m = run.metrics()
        if m.empty:
            continue
        m = m.copy()
        for key, value in run.info.items():
            m[key] = value
        frames.append(m)
    if not frames:
        return pd.DataFrame(columns=RUN_COLUMNS + METRIC_COLUMNS)
    df = pd.concat(frames, ignore_index=True)
    return df[RUN_COLUMNS + METRIC_COLUMNS + [c for c in df.columns if c not in RUN_COLUMNS + METRIC_COLUMNS]]


def load_summaries(
    root: str, exp: str | None = None, scale: str = "cpu", runs: list[Run] | None = None
) -> pd.DataFrame:
    """One row per completed run: its identity, total wall time, final losses, final evaluations
    (lambada_perplexity, lambada_accuracy, heldout_perplexity, heldout_loss) and the per-rank
    maxima of the measured bytes."""
    runs = discover_runs(root, exp, scale) if runs is None else runs
    rows = []
    for run in runs:
        s = run.summary
        row = dict(run.info)
        row.update(
            total_wall_time_s=s.total_wall_time_s,
            final_train_loss=s.final_train_loss,
            final_eval_loss=s.final_eval_loss,
            steps_completed=s.steps_completed,
            samples=s.samples,
        )
        fe = s.final_eval or {}
        for task, values in fe.items():
            if isinstance(values, dict):
                for key, value in values.items():
                    if isinstance(value, (int, float)):
                        row[f"{task}_{key}"] = value
        ranks = s.ranks()
        for key in (
            "peak_rss_bytes",
            "optimizer_state_bytes",
            "param_bytes",
            "grad_bytes",
            "comm_buffer_bytes",
            "cuda_max_allocated_bytes",
        ):
            values = [r.get(key) for r in ranks if isinstance(r, dict) and r.get(key) is not None]
            row[key] = max(values) if values else None
        row["nodes"] = len({r.get("node") for r in ranks if isinstance(r, dict)}) or None
        row["path"] = run.path
        rows.append(row)
    return pd.DataFrame(rows, columns=None if rows else RUN_COLUMNS)


def method_label(method: str) -> str:
    """As the figures write it: the variant's label, its method's (acco.methods), else the key in capitals."""
    label = next((v.label for v in RUN_VARIANTS if v.key == method), None)
    spec = METHODS.get(method) if isinstance(method, str) else None
    return label or (spec.label if spec else str(method).upper())


def run_length_of(run: Run) -> str:
    """How long the run's config says it trains: steps, a budget of samples or tokens, or both."""
    train = run.config.get("train") or {}
    parts = [f"{train[key]} {key}" for key in ("steps", "samples", "tokens") if train.get(key)]
    return " or ".join(parts) or "?"


def trace_is_cut(path: str) -> bool:
    """A trace analysis/slim_results.py cut to its first seconds (its spans would give other medians)."""
    with open(path) as f:
        data = json.load(f)
    return isinstance(data, dict) and "note" in (data.get("otherData") or {})
