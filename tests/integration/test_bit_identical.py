"""Deterministic runs of every method reproduce recorded metrics: a redesign that should change
nothing (issue 12's) changes nothing, and an unintended change to any method's numbers shows here.

tests/fixtures/golden_metrics.json holds every metrics.csv column but the wall time, per committed
step, of 5 runs (ddp with PyTorch DDP + ZeRO, ddp on the flat engine, dpu, wp, acco; 2 ranks,
6 steps, train.deterministic=true, evaluation every 3 steps, seed 3, tests/helpers/runs.py SMALL_LM),
recorded before issue 12's redesign. Floats are stored exactly (JSON numbers written by Python's
repr, which reads back to the same double).

The comparison is exact (==) on a machine like the one that recorded them: the same torch version,
the same CPU kernels (torch.backends.cpu.get_cpu_capability(), e.g. AVX512) and the same extended
instruction sets (`cpu_isa`: AVX-512 subsets, AMX, VNNI; oneDNN picks its matrix kernels by them: an
AMX Xeon with AVX512 capability was seen differing from the recording machine by ~2e-8 relative).
The recording names no instruction sets, so today every machine compares as another one. On another
machine PyTorch picks other vectorized kernels (AVX2, NEON...), whose sums round differently in the
last bits, so the floats are compared to a relative 1e-5 there (far above that rounding after 6 steps,
far below what a change to a method's arithmetic does: one skipped micro-batch or a stale
gradient moves the loss by ~1e-3). Counts (steps, samples, tokens, micro-batches) are exact
everywhere."""

from __future__ import annotations

import csv
import json
import math
import os

import pytest
import torch

from tests.helpers.paths import FIXTURES
from tests.helpers.runs import SMALL_LM, run_train

pytestmark = pytest.mark.integration  # starts worker processes

GOLDEN_PATH = os.path.join(FIXTURES, "golden_metrics.json")
with open(GOLDEN_PATH) as _f:
    GOLDEN = json.load(_f)
RTOL_OTHER_MACHINE = 1e-5


def cpu_isa() -> list[str]:
    """The instruction-set extensions the CPU kernels are chosen by (Linux's /proc/cpuinfo flags)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return []
    return sorted(f for f in set(flags) if f.startswith(("avx512", "amx", "avx_vnni")))


def same_machine(recorded: dict) -> bool:
    return (
        recorded["torch"] == torch.__version__
        and recorded["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
        and recorded.get("cpu_isa") == cpu_isa()
    )


def _cell(value: str):
    if value == "":
        return None
    try:
        return int(value)
    except ValueError:
        return float(value)


def read_rows(out_dir: str, columns) -> list[dict]:
    with open(os.path.join(out_dir, "metrics.csv"), newline="") as f:
        return [{k: _cell(row[k]) for k in columns} for row in csv.DictReader(f)]


def differences(got: list[dict], want: list[dict], exact: bool) -> list[str]:
    """Every cell of `got` that is not the recorded one (exactly, or to RTOL_OTHER_MACHINE for
    floats when `exact` is false)."""
    if len(got) != len(want):
        return [f"{len(got)} rows, recorded {len(want)}"]
    out = []
    for got_row, want_row in zip(got, want):
        for key, expected in want_row.items():
            value = got_row[key]
            if isinstance(expected, float) and not exact:
                ok = value is not None and value == pytest.approx(expected, rel=RTOL_OTHER_MACHINE)
            else:
                ok = value == expected and type(value) is type(expected)
            if not ok:
                out.append(f"step {want_row['step']} {key}: {value!r}, recorded {expected!r}")
    return out


def test_differences_catch_one_changed_number():
    """The comparison itself can fail: one recorded number changed in its last bit (exact) or by
    1e-4 relative (another machine) is reported, and only that one."""
    want = GOLDEN["runs"]["acco"]["rows"]
    got = [dict(row) for row in want]
    assert differences(got, want, exact=True) == [] and differences(got, want, exact=False) == []
    loss = want[3]["train_loss"]
    got[3]["train_loss"] = math.nextafter(loss, math.inf)
    assert differences(got, want, exact=True) == [f"step 4 train_loss: {got[3]['train_loss']!r}, recorded {loss!r}"]
    assert differences(got, want, exact=False) == []  # one ulp: within the other machines' tolerance
    got[3]["train_loss"] = loss * (1 + 1e-4)
    assert len(differences(got, want, exact=False)) == 1


@pytest.mark.parametrize("name", list(GOLDEN["runs"]))
def test_deterministic_run_reproduces_the_recorded_metrics(tmp_path, name):
    run = GOLDEN["runs"][name]
    out = str(tmp_path / name)
    run_train([*run["args"], *GOLDEN["common_args"], *SMALL_LM, f"out_dir={out}"], timeout=300)
    exact = same_machine(GOLDEN["recorded_on"])
    columns = list(run["rows"][0])
    problems = differences(read_rows(out, columns), run["rows"], exact)
    how = "exactly" if exact else f"to rtol {RTOL_OTHER_MACHINE} (not the recording machine)"
    assert not problems, f"{name} differs from tests/fixtures/golden_metrics.json ({how}):\n" + "\n".join(problems)
