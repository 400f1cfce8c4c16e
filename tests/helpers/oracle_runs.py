"""Runs of experiments/train.py on the gradient oracle (oracle.py): a deterministic run whose
final parameters and per-rank micro-batch counts a replay checks."""

from __future__ import annotations

import os

import torch

from .runs import load_run, run_train

ORACLE = [
    "task=tests.helpers.oracle:build_oracle_task",
    "train.log_every=0",
    "train.save_final_params=true",
    "optim.lr=0.05",
    "optim.weight_decay=0.1",
    "optim.schedule=linear",
    "optim.warmup_steps=2",
]


def oracle_run(tmp_path, method_args, world=2, steps=12, accum=2, extra=()):
    out = str(tmp_path / "run")
    run_train(
        [
            *method_args,
            *ORACLE,
            f"world_size={world}",
            f"train.steps={steps}",
            f"train.accum={accum}",
            "train.deterministic=true",
            f"out_dir={out}",
            *extra,
        ]
    )
    run = load_run(out)
    counts = [r["round_micro_batches"] for r in run["summary"]["per_rank"]]
    final = torch.load(os.path.join(out, "final_params.pt"))
    return out, run, counts, final
