"""Before any worker starts: is every dataset, tokenizer and checkpoint the run needs here (or
reachable)? Each missing one is a one-line error naming the hub id, the command to fetch it, and the
config key to point at the local copy. A hub id is here when its snapshot is in the hub cache
(acco/data/hub.py), where experiments/prepare_data.py fetches it: a compute node without internet
passes with the prepared cache."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig

from ..data.sources import DataNotFoundError, check_hub_dataset, data_hint


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
        from ..data.tokenizer import load_pretrained_tokenizer

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


def preflight(cfg: DictConfig) -> None:
    check_source(cfg.data.source, "data.source.path")
    check_tokenizer(cfg.data.tokenizer, "data.tokenizer.path")
    check_model(cfg.model)
    if cfg.final_eval.lambada:
        check_source(cfg.final_eval.lambada_source, "final_eval.lambada_source.path")
