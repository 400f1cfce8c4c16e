"""What a run needs before any worker starts or any job is submitted, besides a valid config: each
GPU holds it (the memory model), and every dataset, tokenizer and model it
reads is here, seen as its job will see the hub. Each returns the problem's one line, or None.

A missing dataset, tokenizer or checkpoint is one line naming the hub id, the command to fetch it and
the config key to point at the local copy. A hub id is here when its snapshot is in the hub cache
(acco.data.hub), where experiments/prepare_data.py fetches it: a compute node without internet
passes with the prepared cache."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig

from ...config.schema import DEFAULT_TASK, RunView, noted, typed
from ...data.sources import DataNotFoundError, check_hub_dataset, data_hint


def memory_problem(cfg: RunView, world: int, note: bool = False) -> str | None:
    """Before any submission of a paper-scale run: will each GPU hold it, and each node's host memory
    (a profile's launcher.mem_gb)? (one line, or None; `note`: say so on stderr when there is no
    estimate to hold it to)."""
    if not (cfg.get("experiment") and cfg.get("scale") == "paper"):
        return None
    from ...train.host_memory import host_fit_problem
    from ...train.memory import fit_problem
    from .plan import shape_of

    try:
        return fit_problem(cfg, world) or host_fit_problem(cfg, world, shape_of(cfg)[2])
    except ValueError as exc:  # e.g. a vocabulary size nowhere in the config: no estimate
        if note:
            print(f"acco: no memory estimate: {exc}", file=sys.stderr, flush=True)
        return None


def with_step_timeout(cfg: RunView) -> tuple[RunView, str | None]:
    """The view with dist.step_timeout_s a number noted in it (null: sized from the run's estimated
    waits at the paper scale, plan.step_timeout), and the problem's one line where an explicit one
    would declare a healthy run dead. Plain data (a script's composed config) is typed first."""
    from .plan import step_timeout

    view = typed(cfg)
    timeout, _, problem = step_timeout(view)
    return noted(view, {"dist.step_timeout_s": timeout}), problem


def data_problem(cfg: RunView, external: bool = False) -> str | None:
    """Every dataset, tokenizer and model the run reads is here (check_data_present), seen as its
    job will see the hub: the problem's one line, or None."""
    if cfg.task != DEFAULT_TASK:
        return None
    try:
        with hub_as_the_job_sees_it(cfg, external):
            check_data_present(cfg)
    except DataNotFoundError as exc:
        return str(exc)
    return None


def hub_as_the_job_sees_it(cfg: RunView, external: bool):
    """Where the run goes to Slurm from here: its checks see the hub as its job will (switched
    off), so a dataset the login node could still download but did not prepare
    is an error now, not in the job after its wait in the queue."""
    import contextlib

    if external or cfg["launcher"].get("name") != "slurm":
        return contextlib.nullcontext()
    from ...config.slurm_profile import as_the_job_sees_the_hub

    return as_the_job_sees_the_hub(cfg["launcher"])


def check_source(source: Mapping[str, Any] | None, config_key: str) -> None:
    if not source or source.get("generator"):
        return
    hub_id, path = source.get("hub_id"), source.get("path")
    if path:
        if not os.path.exists(os.path.expanduser(path)):
            raise DataNotFoundError(
                f"dataset {hub_id or ''} not found at {path}: {data_hint(hub_id, config_key)}".replace(
                    "dataset  ", "dataset "
                )
            )
        return
    if not hub_id:
        raise DataNotFoundError(f"no dataset given: set {config_key} to a local copy")
    check_hub_dataset(hub_id, config_key)


def check_tokenizer(spec: Mapping[str, Any] | None, config_key: str) -> None:
    spec = spec or {}
    if spec.get("kind") == "pretrained":
        from ...data.tokenizer import load_pretrained_tokenizer

        load_pretrained_tokenizer(spec.get("path"), spec.get("hub_id"), config_key=config_key)


def check_model(model_cfg: DictConfig) -> None:
    path = model_cfg.pretrained_path
    if not path or os.path.isdir(path):
        return
    hub_id = model_cfg.hub_id
    if not hub_id:  # a model one of our runs saved (e.g. Fig. 8's start from Fig. 7's pretraining)
        raise DataNotFoundError(
            f"no model at {path}: set model.pretrained_path to a Hugging Face model folder, e.g. a run's "
            f"<out_dir>/model saved with train.save_model=true (slim_results.py removes them once used)"
        )
    raise DataNotFoundError(
        f"pretrained model {hub_id} not found at {path}: run experiments/prepare_data.py with the same "
        f'overrides where the hub is reachable (it fetches it there), or run "hf download {hub_id} '
        f'--local-dir {path}" on a machine with internet, copy it here and set model.pretrained_path={path}'
    )


def check_data_present(cfg: DictConfig) -> None:
    """Raise DataNotFoundError naming the first dataset, tokenizer or model the run reads that is not here."""
    check_source(cfg.data.source, "data.source.path")
    check_tokenizer(cfg.data.tokenizer, "data.tokenizer.path")
    check_model(cfg.model)
    if cfg.final_eval.lambada:
        check_source(cfg.final_eval.lambada_source, "final_eval.lambada_source.path")
