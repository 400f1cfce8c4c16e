"""Shared test helpers: run the real entry point as a subprocess, with a small model and a data
cache shared by the whole test session."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from acco.harness.bench import SMALL_LM as BENCH_SMALL_LM

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "experiments", "train.py")

# A smaller GPT-Neo and corpus than the CPU-scale defaults, so each distributed test run is seconds
# (acco/harness/bench's, which make bench --tiny and the GPU check run too), without progress lines.
SMALL_LM = [*BENCH_SMALL_LM, "train.log_every=0"]


# `make test` runs the suite on two pytest-xdist workers (--dist loadgroup). The modules that use the
# local Slurm cluster (the `cluster` fixture: one per session, started and stopped by it) mark their
# tests xdist_group("slurm"), so they run on one worker, in order; every other test makes its own
# folders, ports and network namespaces.


@pytest.fixture(scope="session", autouse=True)
def acco_cache(tmp_path_factory):
    path = os.environ.get("ACCO_TEST_CACHE") or str(tmp_path_factory.mktemp("acco-cache"))
    os.environ["ACCO_CACHE"] = path
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    # Child processes load test-only task factories (task=tests.oracle:...): the installed package
    # maps only acco/ and analysis/, so the repository root goes on their import path.
    parts = [ROOT, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(parts))
    return path


_fork_server: dict = {}  # this pytest worker's ForkServer ("server"), started by its first run_train


@pytest.fixture(scope="session", autouse=True)
def fork_server(acco_cache, tmp_path_factory):
    """train.py runs forked from a pre-imported parent (tests/forkserver.py): ~6 s of imports less per
    run. ACCO_TEST_FORKSERVER=0 starts every run as a fresh interpreter instead."""
    if os.environ.get("ACCO_TEST_FORKSERVER", "1") != "0":
        _fork_server["socket"] = str(tmp_path_factory.mktemp("forkserver") / "socket")
    yield
    if "server" in _fork_server:
        _fork_server.pop("server").stop()


def run_train(args: list[str], expect: int | None = 0, timeout: float = 600) -> subprocess.CompletedProcess:
    """`python experiments/train.py ARGS` from the repository root, output captured; forked from the
    pre-imported server where the environment allows it (tests/forkserver.py)."""
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


def load_run(out_dir: str) -> dict:
    with open(os.path.join(out_dir, "summary.json")) as f:
        summary = json.load(f)
    with open(os.path.join(out_dir, "config.yaml")) as f:
        cfg = yaml.safe_load(f)
    return {"summary": summary, "cfg": cfg}


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread():
    # the tests' own computations (references, replays) share 2 cores with worker processes;
    # oversubscribed OpenMP threads can slow them by an order of magnitude
    import torch

    torch.set_num_threads(1)


def rounding_mismatch(actual, expected, rtol: float = 1e-4, atol: float = 2e-6, bound: float = 2e-5) -> str | None:
    """Why two parameter vectors are not equal up to rounding, or None when they are. A different
    summation order changes a gradient in its last bits; a few steps of AdamW can turn that into an
    update-sized difference in the odd element whose second moment is tiny (seen: 1 element of
    126,336 off by 3e-6). So: every element within `bound` (1 % of a 2e-3 step), and at most 1 in
    10,000 outside rtol/atol. Different update rules miss both by far."""
    diff = (actual - expected).abs()
    outside = diff > atol + rtol * expected.abs()
    if float(diff.max()) > bound:
        return f"largest difference {float(diff.max()):.3g} > {bound:g}"
    if int(outside.sum()) > max(1, actual.numel() // 10_000):
        return f"{int(outside.sum())} of {actual.numel()} elements outside rtol={rtol:g}, atol={atol:g}"
    return None


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
