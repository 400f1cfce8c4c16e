#!/usr/bin/env python
"""Submit all runs of an experiment to Slurm through submitit (acco.harness.commands.submit; --help).

python experiments/submit.py experiment=fig5/cpu launcher=slurm_local
python experiments/submit.py experiment=fig8/paper launcher=slurm launcher.partition=gpu --wait
"""

import sys

from acco.harness.commands.submit import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
