#!/usr/bin/env python
"""The training entry point (Hydra): acco.harness.commands.train, from the clone. Examples:

python experiments/train.py method=acco world_size=2 train.steps=30
python experiments/train.py method=dpu method.warmup_steps=5 world_size=2
python experiments/train.py experiment=fig5/cpu method=acco
python experiments/train.py -m experiment=fig5/cpu method=ddp,dpu,acco
python experiments/train.py -m experiment=fig5/cpu method=ddp,acco seed=0,1 launcher=slurm   # to Slurm
python experiments/train.py experiment=fig5/cpu method=acco --cfg job    # the config the run will use
torchrun --nproc-per-node=2 experiments/train.py method=acco
srun -n 4 python experiments/train.py method=acco
(the same as python -m acco.harness.commands.train ...)
"""

from acco.harness.commands.train import cli

if __name__ == "__main__":
    cli()
