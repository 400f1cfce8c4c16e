"""Running the benchmark's training runs: each one is the real train command
in a subprocess, on the emulated link, and is measured from its run folder."""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass, field

import yaml

from .. import SOURCE_ROOT, TRAIN
from .measure import measure_run
from .variants import variant


@dataclass
class RunSpec:
    method: str
    world: int
    rate_mbit: float = 0.0
    ratio_target: float | None = None  # the comm/comp ratio this rate was chosen for
    group: str = "grid"  # grid | delay (the grid on an in-process delay link) | calibration | hetero
    round: int = 0
    deterministic: bool = True
    slow_rank: int | None = None
    factor: float = 1.0
    extra: list[str] = field(default_factory=list)

    def name(self) -> str:
        ratio = "x" if self.ratio_target is None else f"{self.ratio_target:g}"
        return f"{self.group}_w{self.world}_r{ratio}_{self.method}_{self.round}"


def overrides(spec: RunSpec, steps: int, accum: int, out_dir: str, base: list[str]) -> list[str]:
    args = [
        *variant(spec.method).overrides,
        f"world_size={spec.world}",
        f"train.steps={steps}",
        f"train.accum={accum}",
        f"train.deterministic={'true' if spec.deterministic else 'false'}",
        "train.log_every=0",
        "train.trace=true",
        f"link.rate_mbit={spec.rate_mbit:g}",
        # the delay group: the in-process link (no TCP shaping, no kernel work); otherwise netns if possible
        f"link.mode={'delay' if spec.group == 'delay' else 'auto'}",
        # a slow link or a slow worker makes long steps: no watchdog verdict on them
        "++dist.step_timeout_s=600",
        f"out_dir={_hydra_value(out_dir)}",
        "overwrite=true",
        *base,
        *spec.extra,
    ]
    if spec.slow_rank is not None:
        args += [f"hetero.slow_rank={spec.slow_rank}", f"hetero.factor={spec.factor:g}"]
    return args


def _hydra_value(text: str) -> str:
    """A run folder as an override's value: quoted where a spelled method put ':' or '=' in its name
    (Hydra's grammar takes neither unquoted)."""
    return f"'{text}'" if re.search(r"[:=]", text) else text


NAME = re.compile(r"^(grid|delay|calibration|hetero)_w(\d+)_r([^_]+)_(.+)_(\d+)$")


def row_from_folder(out_dir: str) -> dict | None:
    """The row run_one returned, rebuilt from a finished run's folder (`--report-only`)."""
    m = NAME.match(os.path.basename(out_dir.rstrip("/")))
    if not m or not os.path.exists(os.path.join(out_dir, "summary.json")):
        return None
    group, world, ratio, method, rnd = m.groups()
    with open(os.path.join(out_dir, "config.yaml")) as f:
        cfg = yaml.safe_load(f)
    hetero = cfg.get("hetero") or {}
    accum = int(cfg["train"]["accum"])
    row = {
        "name": m.group(0),
        "group": group,
        "method": method,
        "world": int(world),
        "round": int(rnd),
        "rate_mbit": float((cfg.get("link") or {}).get("rate_mbit") or 0),
        "ratio_target": None if ratio == "x" else float(ratio),
        "deterministic": bool(cfg["train"]["deterministic"]),
        "slow_rank": hetero.get("slow_rank"),
        "factor": float(hetero.get("factor") or 1.0),
        "accum": accum,
        "steps": int(cfg["train"]["steps"]),
        "process_wall_s": None,
    }
    try:
        row.update(measure_run(out_dir, accum, int(cfg["data"]["micro_batch_size"])))
    except (RuntimeError, ValueError, OSError):
        return None
    return row


def micro_batch_size(out_dir: str) -> int:
    with open(os.path.join(out_dir, "config.yaml")) as f:
        return int(yaml.safe_load(f)["data"]["micro_batch_size"])


def run_one(
    spec: RunSpec, runs_dir: str, steps: int, accum: int, base: list[str], log=print, timeout: float = 900
) -> dict:
    out_dir = os.path.join(runs_dir, spec.name())
    args = overrides(spec, steps, accum, out_dir, base)
    start = time.perf_counter()
    proc = subprocess.run([*TRAIN, *args], cwd=SOURCE_ROOT, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-5:]
        raise RuntimeError(f"bench run {spec.name()} failed (exit {proc.returncode}): " + " | ".join(tail))
    row = {
        "name": spec.name(),
        "group": spec.group,
        "method": spec.method,
        "world": spec.world,
        "round": spec.round,
        "rate_mbit": spec.rate_mbit,
        "ratio_target": spec.ratio_target,
        "deterministic": spec.deterministic,
        "slow_rank": spec.slow_rank,
        "factor": spec.factor,
        "accum": accum,
        "steps": steps,
        "process_wall_s": round(wall, 2),
    }
    row.update(measure_run(out_dir, accum, micro_batch_size(out_dir)))
    log(
        f"bench: {spec.name():<34} {row['samples_per_s']:8.1f} samples/s  {row['s_per_step']:.3f} s/step  "
        f"link {row['link_mode']}" + (f" {spec.rate_mbit:g} Mbit" if spec.rate_mbit else "")
    )
    return row
