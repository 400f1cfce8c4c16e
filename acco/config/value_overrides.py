"""A run's value overrides (`seed=1`, `optim.lr=1e-3`) applied to a Hydra composition, the resolved
plain config taken, and the composition given back as it was: what compose_runs
does for every run of a plan. A deep copy of the composition per run
(~25 ms, the most of a plan of hundreds of runs) is needed only for an override that adds, deletes
or replaces a list or a mapping; one that changes an existing scalar is undone in place."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager

from omegaconf import DictConfig, OmegaConf, ValueNode


def _undo_list(cfg: DictConfig, overrides: list) -> list[tuple[DictConfig, str, object]] | None:
    """(the node holding it, its key, its raw value: an interpolation stays one) for each scalar the
    overrides change; None when one does more than change an existing scalar to a scalar."""
    saved = []
    for o in overrides:
        if o.package is not None or o.is_delete() or o.is_add() or o.is_force_add():
            return None
        if isinstance(o.value(), (dict, list)):
            return None
        parent_key, _, leaf = o.key_or_group.rpartition(".")
        parent = OmegaConf.select(cfg, parent_key, throw_on_missing=False) if parent_key else cfg
        node = parent._get_node(leaf) if isinstance(parent, DictConfig) and leaf in parent else None
        if not isinstance(node, ValueNode):
            return None
        saved.append((parent, leaf, node._value()))
    return saved


@contextmanager
def overridden(cfg: DictConfig, overrides: list) -> Iterator[DictConfig]:
    """`cfg` with the value overrides (Hydra's parsed Override objects) applied by Hydra's own code
    (ConfigLoaderImpl._apply_overrides_to_config, as Hydra applies them after composing); after the
    block `cfg` is as it was: changed in place and put back, or, for an override that does more, a
    copy is changed instead."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    saved = _undo_list(cfg, overrides)
    target = cfg if saved is not None else copy.deepcopy(cfg)
    try:
        ConfigLoaderImpl._apply_overrides_to_config(overrides, target)
        yield target
    finally:
        for parent, leaf, raw in reversed(saved or []):
            parent[leaf] = raw
