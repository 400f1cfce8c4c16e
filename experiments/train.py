#!/usr/bin/env python
"""The training entry point from the clone: one run, or a Hydra sweep with -m (acco.harness.commands.train,
whose docstring lists the forms; the same as python -m acco.harness.commands.train ...).

python experiments/train.py method=acco world_size=2 train.steps=30
python experiments/train.py -m experiment=fig5/cpu method=ddp,acco seed=0,1 launcher=slurm   # to Slurm
"""

from acco.train.signals import SignalLatch

SignalLatch.install_if_rank()  # first: a checkpoint signal during the imports below must not kill a rank

from acco.harness.commands.train import cli  # noqa: E402

if __name__ == "__main__":
    cli()
