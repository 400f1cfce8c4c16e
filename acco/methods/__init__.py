"""The methods, one module each, and their registry: METHODS maps method.name to its MethodSpec,
in the order the suite lists them; `get` looks one up, `register` adds one
(a method defined outside this package, e.g. in a test).

A method defined outside acco is a module that calls `register` when imported; ACCO_METHODS (a
comma list of module names) imports them with this registry, so every process of a run (the
command, its workers, a Slurm job) knows them (docs/methods.md)."""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping

from . import acco, ddp, diloco, dpu, streaming_diloco, wp
from .spec import FLAT, LOCAL, TORCH_DDP, MethodSpec

METHODS: dict[str, MethodSpec] = {m.SPEC.name: m.SPEC for m in (ddp, dpu, wp, acco, diloco, streaming_diloco)}

__all__ = [
    "FLAT",
    "LOCAL",
    "METHODS",
    "PLUGINS_ENV",
    "TORCH_DDP",
    "MethodSpec",
    "UnknownMethod",
    "get",
    "import_plugins",
    "register",
]


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


# the environment variable naming the modules that define methods outside acco
PLUGINS_ENV = "ACCO_METHODS"


def import_plugins(environ: Mapping[str, str] = os.environ) -> None:
    """Import the modules $ACCO_METHODS names (each registers its methods; importing again is a no-op)."""
    for module in filter(None, (m.strip() for m in environ.get(PLUGINS_ENV, "").split(","))):
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ImportError(f"{PLUGINS_ENV}={environ[PLUGINS_ENV]}: cannot import {module!r} ({exc})") from exc


import_plugins()
