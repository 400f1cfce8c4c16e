"""Bad input: one clear line naming the problem, exit code 2, no worker started, nothing written."""

from __future__ import annotations

import os

import pytest

from tests.helpers.runs import SMALL_LM, run_train

pytestmark = pytest.mark.integration  # every test here starts processes

CASES = [
    (["method=foo"], "unknown method 'foo'"),
    (["model=nope"], "unknown model 'nope'"),
    (["world_size=0"], "world_size must be >= 1"),
    (["world_size=two"], "world_size must be an integer"),
    (["train.accum=0"], "train.accum must be >= 1"),
    (["train.steps=0"], "train.steps must be >= 1"),
    (["hetero.factor=0.5", "hetero.slow_rank=0"], "hetero.factor must be >= 1"),
    (["world_size=2", "hetero.slow_rank=2", "hetero.factor=4"], "hetero.slow_rank=2 but there are only 2 ranks"),
    (["method=dpu", "method.warmup_steps=-1"], "method.warmup_steps must be >= 0"),
    (["optim.lr=-0.1"], "optim.lr must be > 0"),
    (["optim.schedule=exp"], "optim.schedule must be one of"),
    (["data.seq_len=4096"], "exceeds the model's max_position_embeddings"),
    (["device=cuda"], "no CUDA GPU is visible"),
    (["method=streaming_diloco", "method.overlap_steps=8"], "overlap_steps (8) must be >= 0 and below"),
    (["method=diloco", "method.mixing=2"], "method.mixing must be <= 1"),
    (["method=diloco", "train.steps=null", "train.samples=1000"], "method=diloco needs a run of known length"),
]


@pytest.mark.parametrize("args,message", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_bad_input_fails_fast_with_one_line(tmp_path, args, message):
    out = tmp_path / "run"
    proc = run_train([*args, f"out_dir={out}"], expect=2, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ") and message in lines[0], lines[0]
    assert "worker" not in proc.stdout + proc.stderr  # nothing was started
    assert not out.exists()


def test_an_out_dir_behind_a_file_fails_fast_with_one_line(tmp_path):
    (tmp_path / "afile").write_text("not a folder")
    out = tmp_path / "afile" / "run"
    proc = run_train(["world_size=1", f"out_dir={out}"], expect=2, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines == [
        f"error: out_dir={out} cannot be created: {tmp_path / 'afile'} is a file, not a folder; choose another out_dir"
    ], proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


def test_a_read_only_out_dir_fails_fast_with_one_line(tmp_path):
    """A read-only filesystem (a bind mount remounted read-only; root's permission bits alone would not
    stop it): exit 2, one line, nothing written."""
    import subprocess

    ro = tmp_path / "ro"
    ro.mkdir()
    if subprocess.run(["mount", "--bind", str(ro), str(ro)], capture_output=True).returncode != 0:
        pytest.skip("cannot bind-mount here (needs root)")
    try:
        if subprocess.run(["mount", "-o", "remount,ro,bind", str(ro)], capture_output=True).returncode != 0:
            pytest.skip("cannot remount read-only here")
        proc = run_train(["world_size=1", f"out_dir={ro / 'run'}"], expect=2, timeout=120)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and "cannot be written" in lines[0] and "read-only" in lines[0], proc.stderr
        assert not (ro / "run").exists()
    finally:
        subprocess.run(["umount", str(ro)], capture_output=True)


def test_completed_run_is_not_overwritten(tmp_path):
    out = tmp_path / "run"
    run_train(["method=acco", *SMALL_LM, "train.steps=2", "world_size=1", f"out_dir={out}"])
    before = (out / "metrics.csv").read_bytes()
    proc = run_train(
        ["method=acco", *SMALL_LM, "train.steps=2", "world_size=1", f"out_dir={out}"], expect=2, timeout=120
    )
    assert "already holds a completed run" in proc.stderr and "overwrite=true" in proc.stderr
    assert (out / "metrics.csv").read_bytes() == before
    run_train(["method=acco", *SMALL_LM, "train.steps=3", "world_size=1", f"out_dir={out}", "overwrite=true"])
    assert len((out / "metrics.csv").read_text().splitlines()) == 4
    assert os.path.exists(out / "summary.json")
