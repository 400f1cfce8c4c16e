"""Composed configs kept on disk between commands: a plan of every experiment (`reproduce.py all
--plan`, a sweep's preview) composes dozens of Hydra configs, ~0.5 s each on 2 cores, and gets the
same ones each time the config files have not changed.

An entry is the resolved plain config (before its `out_dir` is filled in, which may depend on the
clock) under a key that is the SHA-256 of everything the composition reads: every file of the
config tree (acco/conf), of acco/config's code (the schema, the value overrides) and of
acco/methods' (the methods' settings classes), the registered methods (with the source of any
defined outside acco), Hydra's and OmegaConf's versions, the environment the config's `oc.env`
resolvers read (ACCO_*, HOME) and the overrides. A changed file, version or variable is a new key,
never a stale hit. Entries live in `$ACCO_CACHE/compose/` (else ~/.cache/acco/compose/) as JSON,
written whole or not at all (a temporary file renamed); one that cannot be read is composed again.
`ACCO_COMPOSE_CACHE=off` turns the cache off. Old entries are not evicted: each is a few kB.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Callable
from typing import Any

from .location import conf_dir

OFF = "ACCO_COMPOSE_CACHE"
_SOURCES_DIGEST: list[str] = []  # the config tree's and code's digest, computed once per process


def enabled() -> bool:
    return os.environ.get(OFF, "on").lower() not in ("off", "0", "false", "no")


def cache_dir() -> str:
    root = os.environ.get("ACCO_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "acco")
    return os.path.join(root, "compose")


def _files_under(root: str, suffixes: tuple[str, ...]) -> list[str]:
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))
        found += [os.path.join(folder, f) for f in sorted(files) if f.endswith(suffixes)]
    return found


def sources_digest() -> str:
    """SHA-256 of the config files, acco/config's code and the Hydra and OmegaConf versions."""
    if not _SOURCES_DIGEST:
        import hydra
        import omegaconf

        h = hashlib.sha256(f"hydra {hydra.__version__} omegaconf {omegaconf.__version__}".encode())
        conf = conf_dir()
        code = os.path.dirname(os.path.abspath(__file__))
        methods_code = os.path.join(os.path.dirname(code), "methods")
        files = [
            *_files_under(conf, (".yaml", ".yml")),
            *_files_under(code, (".py",)),
            *_files_under(methods_code, (".py",)),
        ]
        for path in files:
            h.update(os.path.relpath(path, os.path.dirname(conf)).encode() + b"\0")
            with open(path, "rb") as f:
                h.update(f.read() + b"\0")
        _SOURCES_DIGEST.append(h.hexdigest())
    return _SOURCES_DIGEST[0]


def registered_methods() -> list[list[str]]:
    """Each registered method's name and settings class, with the SHA-256 of its module's source
    where it is defined outside acco (a method registered in this process, or by $ACCO_METHODS)."""
    from ..methods import METHODS

    found = []
    for name, spec in sorted(METHODS.items()):
        module = sys.modules.get(spec.config.__module__)
        source = getattr(module, "__file__", None) or ""
        outside = source and not spec.config.__module__.startswith("acco.")
        with open(source, "rb") if outside else contextlib.nullcontext(None) as f:
            digest = hashlib.sha256(f.read()).hexdigest() if f else ""
        found.append([name, f"{spec.config.__module__}.{spec.config.__qualname__}", digest])
    return found


def key(kind: str, *parts: Any) -> str:
    """The entry's key: the sources, the registered methods, the environment the resolvers read,
    and the request."""
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("ACCO_") and k != OFF or k == "HOME")
    request = json.dumps([kind, env, registered_methods(), *parts], sort_keys=True, default=str)
    return hashlib.sha256(f"{sources_digest()}\0{request}".encode()).hexdigest()


def _read(path: str) -> Any:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _write(path: str, value: Any) -> None:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(value, f)
        os.replace(tmp, path)
    except OSError:
        pass  # a cache that cannot be written (read-only home, full disk) is only slower


def cached(kind: str, parts: tuple, make: Callable[[], Any]) -> Any:
    """`make()`'s value under the key of (`kind`, `parts`): read from disk where an entry exists,
    else made and kept. Only a value that JSON gives back equal is kept (plain dicts, lists, str,
    numbers, None: a composed plain config)."""
    if not enabled():
        return make()
    path = os.path.join(cache_dir(), f"{key(kind, *parts)}.json")
    hit = _read(path)
    if isinstance(hit, dict) and "value" in hit:
        return hit["value"]
    value = make()
    try:
        same = json.loads(json.dumps(value)) == value
    except (TypeError, ValueError):  # a date, a set, NaN: not JSON's
        same = False
    if same:
        _write(path, {"value": value})
    return value
