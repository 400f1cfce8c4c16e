"""Variants of a method, spelled as the trainer sets them: the method's name, then `:key=value` for
each setting that picks the variant (`ddp:impl=flat:overlap_backward=true`, `acco:deterministic=false`).
A key without a dot is a `method.` setting, or `train.deterministic` for `deterministic`.

The simulator and the bench keep a short key per variant for their result columns (`ddp_overlap`,
`acco_adaptive`, `ddp_flat`); each tool's table maps its keys to trainer spellings, and `resolve` turns
what a user typed (a spelling, or an old key with a one-line notice) into the tool's variant. A
variant the trainer has no method for (FSDP, replicated DDP in the simulator) has `method=None` and
only its key. A bare method name that is also a key names that key's variant, not the trainer's
defaults: the simulator's `acco` is the deterministic one, as the paper ran it (the trainer's
default is adaptive), so a figure's columns keep their meaning."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from . import METHODS, get

# the trainer's defaults of the settings the tables below use (conf/config.yaml and
# conf/method/*.yaml; tests/unit/test_method_variants.py composes the config and checks they agree)
_SHARED_DEFAULTS: dict[str, Any] = {
    "method.overlap_backward": False,
    "method.comm_hook": "allreduce",
    "method.bucket_mb": None,
    "method.warmup_steps": 0,
    "train.deterministic": False,
}
# the settings that live outside `method.`, by the short key a spelling may use
_TRAIN_KEYS = {"deterministic": "train.deterministic"}


class UnknownVariant(ValueError):
    pass


def default(method: str, path: str) -> Any:
    """The trainer's default of setting `path` (e.g. "method.impl") for `method`."""
    if path == "method.impl":
        return get(method).default_impl
    return _SHARED_DEFAULTS.get(path)


@dataclass(frozen=True)
class Variant:
    key: str  # the tool's short name, in its result files
    method: str | None  # the trainer's method that runs it; None: the tool models what the trainer lacks
    settings: tuple[tuple[str, Any], ...] = ()  # config path -> value, beside the method's defaults
    label: str = ""

    @property
    def spelling(self) -> str:
        """The trainer's spelling (`ddp:impl=flat`); the key where the trainer has no such method."""
        if self.method is None:
            return self.key
        return ":".join([self.method, *(f"{_short(p)}={_text(v)}" for p, v in self.settings)])

    @property
    def overrides(self) -> list[str]:
        """The Hydra overrides that run it (experiments/train.py)."""
        if self.method is None:
            raise UnknownVariant(f"{self.key!r} is not a method the trainer runs")
        return [f"method={self.method}", *(f"{p}={_text(v)}" for p, v in self.settings)]

    def value(self, path: str) -> Any:
        return dict(self.settings).get(path, default(self.method, path) if self.method else None)

    def extended(self, *settings: tuple[str, Any]) -> Variant:
        """This variant with more settings after its own (a tool's, e.g. the bench's bucket size);
        a path it already sets takes the new value in its place."""
        return replace(self, settings=tuple((dict(self.settings) | dict(settings)).items()))


# the flat ddp that reduce-scatters its gradients bucket by bucket during the last backward
# (method.overlap_backward): the DDP that hides what it can, as PyTorch's DDP, ZeRO's overlap_comm
# and FSDP run it. The simulator, the bench and the analysis all key it `ddp_overlap`; a tool adds
# its own settings (`extended`) or label (dataclasses.replace)
OVERLAPPED_DDP = Variant(
    "ddp_overlap",
    "ddp",
    (("method.impl", "flat"), ("method.overlap_backward", True)),
    "DDP (overlapped)",
)


def parse(text: str) -> tuple[str, dict[str, Any]]:
    """`ddp:impl=flat:overlap_backward=true` -> ("ddp", {"method.impl": "flat",
    "method.overlap_backward": True}); a malformed setting is one line naming it."""
    name, *parts = text.strip().split(":")
    settings: dict[str, Any] = {}
    for part in parts:
        key, eq, value = part.partition("=")
        if not eq or not key:
            raise UnknownVariant(f"{text!r}: write each setting as key=value after the method, e.g. ddp:impl=flat")
        path = key if "." in key else _TRAIN_KEYS.get(key, f"method.{key}")
        settings[path] = _value(value)
    return name, settings


def spelled(method: str, settings: Mapping[str, Any]) -> Variant:
    """A variant for a spelling no table names (the bench runs any the trainer runs): key = spelling."""
    get(method)
    v = Variant(key="", method=method, settings=tuple(settings.items()))
    return Variant(key=v.spelling, method=method, settings=v.settings)


def resolve(text: str, table: Sequence[Variant], *, tool: str, open_ended: bool = False) -> Variant:
    """The variant of `table` that `text` names: a key (an old one that is not a method's name says
    its new spelling once, on stderr), or a trainer spelling. A spelling's stated settings must agree
    with the variant's (its unstated ones are the trainer's defaults); of several that agree, the one
    closest to the defaults. With `open_ended`, a spelling no variant matches is its own variant
    (checked against the registry); otherwise it is one line naming the tool's spellings."""
    by_key = {v.key: v for v in table}
    if ":" not in text and text in by_key:
        v = by_key[text]
        if text not in METHODS and v.method is not None:
            _notice(f"{tool}: {text!r} is now spelled {v.spelling!r} (the old name works for one more release)")
        return v
    name, settings = parse(text)
    if name not in METHODS:
        raise UnknownVariant(f"{tool}: unknown method {text!r}; choose from: {_choices(table)}")
    matches = [v for v in table if v.method == name and all(v.value(p) == x for p, x in settings.items())]
    if matches:
        changed = [len(_changed(v)) for v in matches]
        closest = [v for v, n in zip(matches, changed) if n == min(changed)]
        if len(closest) == 1:
            return closest[0]
        raise UnknownVariant(f"{tool}: {text!r} names several variants ({_choices(closest)}); state more settings")
    if open_ended:
        return spelled(name, settings)
    raise UnknownVariant(f"{tool}: {text!r} is not a variant it models; choose from: {_choices(table)}")


def resolve_all(texts: Iterable[str], table: Sequence[Variant], *, tool: str, open_ended: bool = False) -> list[str]:
    """The keys of a comma list's entries (see `resolve`), in the order given, each once."""
    keys: list[str] = []
    for text in texts:
        key = resolve(text, table, tool=tool, open_ended=open_ended).key
        if key not in keys:
            keys.append(key)
    return keys


def _changed(v: Variant) -> list[str]:
    return [p for p, x in v.settings if v.method is not None and x != default(v.method, p)]


def _choices(table: Iterable[Variant]) -> str:
    return ", ".join(v.spelling for v in table)


def _short(path: str) -> str:
    if path.startswith("method."):
        return path.removeprefix("method.")
    return next((k for k, p in _TRAIN_KEYS.items() if p == path), path)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return "null" if value is None else str(value)


def _value(text: str) -> Any:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("null", "none"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


_told: set[str] = set()


def _notice(line: str) -> None:
    if line not in _told:
        _told.add(line)
        print(line, file=sys.stderr)
