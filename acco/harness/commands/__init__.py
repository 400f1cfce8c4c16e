"""The harness's commands as modules, each run with `python -m acco.harness.commands.<name>`; the
clone's experiments/<name>.py are thin wrappers over them (the same arguments, the same output):

- train: one training run or a Hydra sweep;
- submit: an experiment's runs to Slurm as job arrays (also the reproduce command's --launcher slurm)."""
