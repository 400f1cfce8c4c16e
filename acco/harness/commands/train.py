"""The training entry point (Hydra): `python -m acco.harness.commands.train`, which the clone's
experiments/train.py runs (and the harness, for a run in a subprocess). Examples:

python experiments/train.py method=acco world_size=2 train.steps=30
python experiments/train.py method=dpu method.warmup_steps=5 world_size=2
python experiments/train.py experiment=fig5/cpu method=acco
python experiments/train.py -m experiment=fig5/cpu method=ddp,dpu,acco
python experiments/train.py -m experiment=fig5/cpu method=ddp,acco seed=0,1 launcher=slurm   # to Slurm
python experiments/train.py -m experiment=fig5/cpu method=ddp,acco seed=0,1 --plan   # a preview, runs nothing
python experiments/train.py experiment=fig5/cpu method=acco --cfg job    # the config the run will use
torchrun --nproc-per-node=2 experiments/train.py method=acco
srun -n 4 python experiments/train.py method=acco
"""

# ruff: noqa: E402 - the signal latch goes in before the imports (SignalLatch.install_if_rank)

import sys
from typing import cast

from acco.train.signals import SignalLatch

SignalLatch.install_if_rank()  # before the imports below: a checkpoint signal must not kill a starting rank

import shutil
import tempfile

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from acco.config.location import conf_dir
from acco.config.schema import register
from acco.config.validate import ConfigError, check_overrides
from acco.harness.entry import fail_config, launch, prepare


# an absolute path: the same folder from experiments/train.py, python -m and an installed acco
@hydra.main(config_path=conf_dir(), config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> int:
    hydra_cfg = HydraConfig.get()
    multirun = hydra_cfg.mode == RunMode.MULTIRUN
    # a job of acco's local sweep (its Hydra launcher) returns its exit
    # code to the launcher, which goes on with the next job and closes with a table
    in_local_sweep = multirun and str(hydra_cfg.launcher.get("_target_", "")).endswith("local_launcher.LocalLauncher")
    try:
        run = prepare(
            cast(dict, OmegaConf.to_container(cfg, resolve=True)),  # the composed config: a plain dict
            list(hydra_cfg.overrides.task),
            multirun=multirun,
        )
        code = launch(run)
    except SystemExit as exc:
        if not in_local_sweep:
            raise
        return int(exc.code or 0) if isinstance(exc.code, int) else 1
    if code and in_local_sweep:
        return code
    if code:
        sys.exit(code)
    return 0


def cli() -> None:
    """The command line: the overrides checked (bad input: one line, exit 2), a sweep's --plan made
    Hydra overrides (sweep_flags), then Hydra's main."""
    argv, scratch = sweep_flags(sys.argv[1:])
    sys.argv[1:] = argv
    try:
        check_overrides(argv, conf_dir())
    except ConfigError as exc:
        fail_config(str(exc))
    register()  # the schema in Hydra's ConfigStore: conf/config.yaml's defaults start with it
    try:
        main()
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def sweep_flags(argv: list[str]) -> tuple[list[str], str | None]:
    """`-m ... --plan` (a sweep's preview, by acco's local sweep launcher) as the
    launcher's setting hydra.launcher.plan=true, Hydra's sweep folder (its multirun.yaml) in a
    scratch folder of its own: a preview leaves nothing under results_root. (argv, that folder to
    remove afterwards, or None). `-m ... --cfg`, which Hydra refuses with a traceback, and --plan
    without -m: one line pointing at the preview, exit 2."""
    multirun = any(a in ("-m", "--multirun") for a in argv)
    shows_cfg = any(a in ("-c", "--cfg") or a.startswith("--cfg=") for a in argv)
    if multirun and shows_cfg:
        fail_config(
            "--cfg shows one run's config, -m runs a sweep: preview the sweep's jobs (folders, complete or "
            "to train, ETA) with --plan instead of --cfg, or drop -m and give one job's values to see its config"
        )
    if "--plan" not in argv:
        return argv, None
    if not multirun:
        fail_config("--plan previews a sweep (-m ...); one run's config: --cfg job")
    other = [a for a in argv if a.startswith("hydra/launcher=") and a != "hydra/launcher=acco_local"]
    if other:  # Hydra's own launchers have no preview: they would run the sweep
        fail_config(f"--plan is acco's sweep launcher's preview; drop {other[0]}")
    argv = [a for a in argv if a != "--plan"]
    argv.append("hydra.launcher.plan=true")
    scratch = None
    if not any(a.startswith("hydra.sweep.dir=") for a in argv):
        scratch = tempfile.mkdtemp(prefix="acco-plan-")
        argv.append(f"hydra.sweep.dir={scratch}")
    return argv, scratch


if __name__ == "__main__":
    cli()
