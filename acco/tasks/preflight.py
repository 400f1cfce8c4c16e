"""Before any worker starts: is every dataset, tokenizer and checkpoint the run needs here (or
reachable)? Each missing one is a one-line error naming the hub id, the command to fetch it, and the
config key to point at the local copy."""

from __future__ import annotations

import os

from ..data.sources import DataNotFoundError, data_hint, hub_reachable


def check_source(source: dict | None, config_key: str) -> None:
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
    if not hub_reachable():
        raise DataNotFoundError(f"dataset {hub_id} is not available offline: {data_hint(hub_id, config_key)}")


def check_tokenizer(spec: dict | None, config_key: str) -> None:
    if (spec or {}).get("kind") == "pretrained":
        from ..data.tokenizer import load_pretrained_tokenizer

        load_pretrained_tokenizer(spec.get("path"), spec.get("hub_id"), config_key=config_key)


def check_model(model_cfg: dict) -> None:
    path = model_cfg.get("pretrained_path")
    if path and not os.path.isdir(path):
        hub_id = model_cfg.get("hub_id") or "the model"
        raise DataNotFoundError(
            f"pretrained model {hub_id} not found at {path}: on a machine with internet run "
            f'"huggingface-cli download {hub_id} --local-dir {path}", copy it here and set '
            f"model.pretrained_path={path}"
        )


def preflight(cfg: dict) -> None:
    data = cfg.get("data") or {}
    check_source(data.get("source"), "data.source.path")
    check_tokenizer(data.get("tokenizer"), "data.tokenizer.path")
    check_model(cfg.get("model") or {})
    final = cfg.get("final_eval") or {}
    if final.get("lambada"):
        check_source(final.get("lambada_source"), "final_eval.lambada_source.path")
