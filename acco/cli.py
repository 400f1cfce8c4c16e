"""What experiments/train.py does with a composed config: validate, lay out the run folder, start
the workers (spawned locally, or this process as one rank under torchrun / srun)."""
from __future__ import annotations

import os
import shutil
import sys

import torch

from .config_check import ConfigError, validate
from .launch import external_env, local_envs
from .run_io import read_summary, write_json_atomic

RUN_FILES = ("metrics.csv", "summary.json", "trace.json", "final_params.pt", "config.yaml")


def fail_config(message: str) -> None:
    print(f"error: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def prepare_out_dir(out_dir: str, config_yaml: str) -> None:
    os.makedirs(out_dir, exist_ok=True)
    for name in RUN_FILES:  # leftovers of an earlier, unfinished or overwritten run
        path = os.path.join(out_dir, name)
        if os.path.isfile(path):
            os.remove(path)
    if os.path.isdir(os.path.join(out_dir, "model")):
        shutil.rmtree(os.path.join(out_dir, "model"))
    with open(os.path.join(out_dir, "config.yaml"), "w") as f:
        f.write(config_yaml)


def run(cfg: dict, config_yaml: str) -> int:
    env = external_env()
    try:
        world = validate(cfg, env.world_size if env else None, torch.cuda.is_available())
    except ConfigError as exc:
        fail_config(str(exc))
    cfg = dict(cfg, world_size=world)
    out_dir = cfg["out_dir"]
    if env is not None:  # torchrun / srun: this process is one rank
        if env.rank == 0:
            prepare_out_dir(out_dir, config_yaml)
        from .worker import run_rank
        run_rank(cfg, env)
        return 0
    prepare_out_dir(out_dir, config_yaml)
    print(f"acco: {cfg['method']['name']} with {world} local worker(s) -> {out_dir}", file=sys.stderr,
          flush=True)
    import torch.multiprocessing as mp
    from .worker import spawned_worker
    try:
        mp.start_processes(spawned_worker, args=(cfg, local_envs(world)), nprocs=world, join=True,
                           start_method="spawn")
    except (mp.ProcessRaisedException, mp.ProcessExitedException) as exc:
        first = str(exc).strip().splitlines()
        summary = read_summary(out_dir)
        if not summary or summary.get("status") != "failed":
            write_json_atomic(os.path.join(out_dir, "summary.json"),
                              {"method": cfg["method"]["name"], "world_size": world, "status": "failed",
                               "error": first[0] if first else repr(exc)})
        print(f"error: training failed ({first[0] if first else exc}); see {out_dir}/summary.json",
              file=sys.stderr, flush=True)
        return 1
    return 0
