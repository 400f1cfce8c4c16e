"""Plain data of the run config's typed view (acco.config.schema.typed), where plain data is
needed: a file, a hash, a pickle, or code that keeps to plain data (acco.data, Hugging Face
configs, W&B). A module of its own, importing nothing of the package: every layer above config
may use it (the trainer, the checkpoint code, the tasks, the models)."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf


def plain(node: Any) -> Any:
    """Dicts, lists and scalars for a view or a part of it; anything else as it is."""
    if isinstance(node, (DictConfig, ListConfig)):
        return OmegaConf.to_container(node, resolve=True)
    return node
