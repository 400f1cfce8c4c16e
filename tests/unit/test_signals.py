"""The checkpoint-signal latch (acco/train/signals.py): in a process that will be a rank of an srun step
or of torchrun it is in place before the entry point's imports, so Slurm's early time-limit signal is
kept for the first step boundary instead of killing the rank; a launcher of ours is left alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from tests.helpers.paths import ROOT

# the entry point's first lines, then a signal to itself before anything else is imported
PROBE = """
import os, signal, sys
sys.argv = ["train.py"]
from acco.train.signals import SignalLatch
SignalLatch.install_if_rank()
os.kill(os.getpid(), signal.SIGUSR1)
print("latched", SignalLatch.signum)
"""


def probe(extra_env: dict) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "TORCHELASTIC_"))}
    return subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env={**env, **extra_env}, capture_output=True, text=True
    )


def test_a_rank_keeps_an_early_signal_and_a_launcher_does_not_latch():
    for env in ({"SLURM_STEP_ID": "0", "SLURM_PROCID": "1"}, {"TORCHELASTIC_RUN_ID": "x"}):
        proc = probe(env)
        assert proc.returncode == 0 and proc.stdout.strip() == f"latched {int(signal.SIGUSR1)}", proc.stderr
    proc = probe({})  # not a rank: the default action, as before
    assert proc.returncode == -signal.SIGUSR1


def test_the_entry_points_install_it_first():
    for path in ("experiments/train.py", "acco/harness/commands/train.py"):
        with open(os.path.join(ROOT, path)) as f:
            code = [ln for ln in f.read().splitlines() if ln.startswith(("import ", "from ", "SignalLatch."))]
        first = next(i for i, ln in enumerate(code) if ln.startswith("SignalLatch.install_if_rank()"))
        assert all(ln.startswith(("import sys", "from typing", "from acco.train.signals")) for ln in code[:first]), path
