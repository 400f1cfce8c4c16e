"""Tables of named parts a method's spec points at (its schedule of rounds, its reference update):
the suite's entries are registered by the modules that implement them; a method defined outside
acco registers its own, or names one as `module:function`, imported when first looked up (as
`task=module:function` does), so its spec's module needs nothing heavier than acco.methods."""

from __future__ import annotations

import importlib
from collections.abc import MutableMapping
from typing import TypeVar

T = TypeVar("T")


def lookup(table: MutableMapping[str, T], name: str, what: str) -> T:
    """table[name], or the function `module:function` names (kept in the table); an unknown
    name is one line naming the known ones."""
    if name in table:
        return table[name]
    module, colon, attr = name.partition(":")
    if not colon:
        raise ValueError(f"no {what} named {name!r}; known: {', '.join(table)} (or module:function)")
    table[name] = getattr(importlib.import_module(module), attr)
    return table[name]


def add(table: MutableMapping[str, T], name: str, entry: T, what: str) -> T:
    """Register `entry` as `name` (another entry under a name already taken is refused)."""
    if name in table and table[name] is not entry:
        raise ValueError(f"a {what} named {name!r} is already registered")
    table[name] = entry
    return entry
