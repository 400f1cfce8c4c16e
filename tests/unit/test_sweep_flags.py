"""train.py's command line for a sweep's preview (acco/harness/commands/train.py sweep_flags): --plan
becomes the launcher's setting with Hydra's sweep folder in a scratch folder (nothing under
results_root); what cannot be meant is one line, exit 2, not Hydra's traceback."""

import os
import shutil

import pytest

from acco.harness.commands.train import sweep_flags


def test_plan_sets_the_launcher_and_a_scratch_sweep_folder():
    argv, scratch = sweep_flags(["-m", "experiment=fig5/cpu", "seed=0,1", "--plan"])
    try:
        planned = ["hydra.launcher.plan=true", f"hydra.sweep.dir={scratch}"]
        assert argv == ["-m", "experiment=fig5/cpu", "seed=0,1", *planned]
        assert scratch is not None and os.path.isdir(scratch) and not os.listdir(scratch)
    finally:
        shutil.rmtree(str(scratch), ignore_errors=True)
    assert sweep_flags(["-m", "seed=0,1"]) == (["-m", "seed=0,1"], None)  # no --plan: as given


@pytest.mark.parametrize(
    "argv, words",
    [
        (["-m", "seed=0,1", "--cfg", "job"], "--plan"),
        (["--multirun", "seed=0,1", "--cfg=job"], "--plan"),
        (["seed=0", "--plan"], "previews a sweep"),
        (["-m", "seed=0,1", "hydra/launcher=basic", "--plan"], "drop hydra/launcher=basic"),
    ],
)
def test_what_cannot_be_meant_is_one_line(argv, words, capsys):
    with pytest.raises(SystemExit) as exc:
        sweep_flags(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and words in err and len(err.strip().splitlines()) == 1
