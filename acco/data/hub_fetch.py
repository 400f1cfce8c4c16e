"""Everything a run needs from the Hugging Face hub, fetched before any job starts (by
experiments/prepare_data.py on the login node), so the jobs run with the hub switched off
(HF_HUB_OFFLINE=1) and find it all on disk:

* a dataset named by hub id (data.source, final_eval.lambada_source): into the hub cache,
  only the files the data code reads (KNOWN_DATASETS' include pattern);
* a pretrained tokenizer named by hub id (data.tokenizer): its files into the hub cache;
* a hub id whose config also names a local folder that is missing (data.source.path,
  data.tokenizer.path, model.pretrained_path): into that folder, as `hf download --local-dir`
  leaves it — a pretrained model's config, tokenizer and weights (safetensors, else PyTorch's .bin).

What is already there is left alone; nothing is fetched when the hub is not reachable (preflight
then names what is missing)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig

from .sources import DataNotFoundError, _one_line, hub_include
from .tokenizer import TOKENIZER_FILES

__all__ = ["HubNeed", "fetch_needs", "hub_needs"]

MODEL_FILES = (*TOKENIZER_FILES, "*.safetensors")
MODEL_BIN_FILES = ("pytorch_model*.bin",)  # a repository without safetensors weights


@dataclass(frozen=True)
class HubNeed:
    what: str  # dataset | tokenizer | model
    repo_id: str
    repo_type: str  # dataset | model
    include: tuple[str, ...] | None  # None: the whole repository
    local_dir: str | None  # None: the hub cache
    config_key: str  # what points at a local copy instead

    def present(self) -> bool:
        from ..data.hub import cached_snapshot

        if self.local_dir is not None:
            return os.path.exists(os.path.expanduser(self.local_dir))
        return cached_snapshot(self.repo_id, self.repo_type) is not None


def _dataset_need(source: Mapping[str, Any] | None, config_key: str) -> list[HubNeed]:
    source = source or {}
    hub_id, path = source.get("hub_id"), source.get("path")
    if source.get("generator") or not hub_id or (path and os.path.exists(os.path.expanduser(path))):
        return []
    include = hub_include(hub_id)
    return [HubNeed("dataset", hub_id, "dataset", tuple(include) if include else None, path or None, config_key)]


def hub_needs(cfg: DictConfig) -> list[HubNeed]:
    """What a run of `cfg` reads from the hub and does not find where its config says."""
    needs = _dataset_need(cfg.data.source, "data.source.path")
    if cfg.final_eval.lambada:
        needs += _dataset_need(cfg.final_eval.lambada_source, "final_eval.lambada_source.path")
    tok = cfg.data.tokenizer or {}
    if tok.get("kind") == "pretrained" and tok.get("hub_id"):
        path = tok.get("path")
        if not (path and os.path.exists(os.path.expanduser(path))):
            needs.append(
                HubNeed("tokenizer", tok["hub_id"], "model", TOKENIZER_FILES, path or None, "data.tokenizer.path")
            )
    model = cfg.model
    if model.pretrained_path and model.hub_id and not os.path.isdir(model.pretrained_path):
        needs.append(
            HubNeed("model", model.hub_id, "model", MODEL_FILES, model.pretrained_path, "model.pretrained_path")
        )
        # the tokenizer saved beside the model (fig8): the model's download brings it
        needs = [n for n in needs if not (n.what == "tokenizer" and n.local_dir == model.pretrained_path)]
    return needs


def fetch_needs(needs: list[HubNeed], log=print) -> None:
    """Fetch each need not yet on disk (see the module docstring); DataNotFoundError (one line) when
    a download fails."""
    from .hub import fetch_snapshot, hub_cache_dir
    from .sources import hub_reachable

    missing = [n for n in dict.fromkeys(needs) if not n.present()]
    if not missing:
        return
    if not hub_reachable():
        log(f"prepare: the hub is not reachable: {len(missing)} item(s) not fetched")
        return
    for need in missing:
        where = need.local_dir or hub_cache_dir()
        log(f"prepare: fetching {need.what} {need.repo_id} into {where}")
        try:
            folder = fetch_snapshot(need.repo_id, need.repo_type, list(need.include or []) or None, need.local_dir)
            if need.what == "model" and not any(f.endswith(".safetensors") for f in os.listdir(folder)):
                fetch_snapshot(need.repo_id, need.repo_type, list(MODEL_BIN_FILES), need.local_dir)
        except Exception as exc:  # noqa: BLE001 - any failure: not fetched, say which and how to do it by hand
            raise DataNotFoundError(
                f"{need.what} {need.repo_id} could not be fetched into {where} ({type(exc).__name__}: "
                f"{_one_line(exc, 160)}): fetch it by hand and set {need.config_key} to it"
            ) from exc
