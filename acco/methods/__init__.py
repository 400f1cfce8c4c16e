"""The methods, one module each, and their registry: METHODS maps method.name to its MethodSpec
(acco/methods/spec.py), in the order the suite lists them; `get` looks one up, `register` adds one
(a method defined outside this package, e.g. in a test)."""

from __future__ import annotations

from . import acco, ddp, diloco, dpu, streaming_diloco, wp
from .spec import FLAT, LOCAL, TORCH_DDP, MethodSpec

METHODS: dict[str, MethodSpec] = {m.SPEC.name: m.SPEC for m in (ddp, dpu, wp, acco, diloco, streaming_diloco)}

__all__ = ["FLAT", "LOCAL", "METHODS", "TORCH_DDP", "MethodSpec", "UnknownMethod", "get", "register"]


class UnknownMethod(ValueError):
    pass


def get(name: str) -> MethodSpec:
    """The spec of method `name`; an unknown name is one line naming the known ones."""
    try:
        return METHODS[name]
    except (KeyError, TypeError):
        raise UnknownMethod(f"unknown method {name!r}; choose one of: {', '.join(METHODS)}") from None


def register(spec: MethodSpec) -> MethodSpec:
    """Adds `spec` to the registry (a name already there is refused: one spec per name)."""
    if spec.name in METHODS and METHODS[spec.name] is not spec:
        raise ValueError(f"method {spec.name!r} is already registered")
    METHODS[spec.name] = spec
    return spec
