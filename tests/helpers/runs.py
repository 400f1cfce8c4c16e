"""Running the real entry point: `python experiments/train.py ARGS` as a subprocess with a small
model, forked from a pre-imported server where it can be (forkserver.py), and reading back what a
run wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import yaml

from acco.harness.bench import SMALL_LM as BENCH_SMALL_LM

from .paths import ROOT, TRAIN

# A smaller GPT-Neo and corpus than the CPU-scale defaults, so each distributed test run is seconds
# (acco/bench's, which make bench --tiny and the GPU check run too), without progress lines.
SMALL_LM = [*BENCH_SMALL_LM, "train.log_every=0"]

# this pytest worker's fork server: "socket" once conftest's fork_server fixture allows one,
# "server" (a ForkServer) started by the first run_train
_fork_server: dict = {}


def use_fork_server(socket: str) -> None:
    """Let run_train fork its runs from a server listening on `socket` (started on first use)."""
    _fork_server["socket"] = socket


def stop_fork_server() -> None:
    if "server" in _fork_server:
        _fork_server.pop("server").stop()


def run_train(args: list[str], expect: int | None = 0, timeout: float = 600) -> subprocess.CompletedProcess:
    """`python experiments/train.py ARGS` from the repository root, output captured; forked from the
    pre-imported server where the environment allows it (tests/helpers/forkserver.py)."""
    env = os.environ.copy()
    proc = None
    if "socket" in _fork_server:
        if "server" not in _fork_server:
            from .forkserver import ForkServer

            _fork_server["server"] = ForkServer(_fork_server["socket"], env)
        proc = _fork_server["server"].run(TRAIN, args, ROOT, env, timeout)
    if proc is None:
        proc = subprocess.run(
            [sys.executable, TRAIN, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env
        )
    if expect is not None and proc.returncode != expect:
        raise AssertionError(
            f"train.py {' '.join(args)} exited {proc.returncode} (expected {expect})\n"
            f"--- stderr ---\n{proc.stderr[-6000:]}"
        )
    return proc


def run_script(name, args, **kw):
    """`python experiments/NAME ARGS` from the repository root, output captured."""
    return subprocess.run(
        [sys.executable, os.path.join(ROOT, "experiments", name), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        **kw,
    )


def load_run(out_dir: str) -> dict:
    with open(os.path.join(out_dir, "summary.json")) as f:
        summary = json.load(f)
    with open(os.path.join(out_dir, "config.yaml")) as f:
        cfg = yaml.safe_load(f)
    return {"summary": summary, "cfg": cfg}


def run_folders(root, exp: str | None = None) -> list:
    """The run folders (a config.yaml inside) anywhere under `root` (an experiment's folder, a sweep's
    folder under sweeps/, ...), sorted by name; `exp`: only that experiment's runs."""
    from pathlib import Path

    out = []
    for cfg_path in Path(root).rglob("config.yaml"):
        if any(part.startswith(".") for part in cfg_path.relative_to(root).parts):
            continue  # .multirun/, .submitit/
        if exp is not None:
            with open(cfg_path) as f:
                if ((yaml.safe_load(f) or {}).get("experiment") or {}).get("id") != exp:
                    continue
        out.append(cfg_path.parent)
    return sorted(out, key=lambda p: p.name)
