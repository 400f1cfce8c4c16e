"""A run folder's saved config.yaml, read fast: a plan of every experiment (the reproduce command's
--plan, a sweep's preview) reads hundreds of them, and PyYAML's pure-Python loader takes ~20 ms a file where
its C loader (libyaml, when PyYAML was built with it) takes ~4 ms; both give the same data."""

from __future__ import annotations

import os

import yaml

from ..config.compose_cache import cached

# the C loader where this PyYAML has libyaml, else the pure-Python one (the same safe subset)
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(path: str) -> dict:
    """The mapping a YAML file holds ({} for an empty file); OSError and yaml.YAMLError propagate.
    Kept as JSON in the compose cache under the file's path, inode,
    size and modification time: a plan reads every committed run's config.yaml each time."""
    st = os.stat(path)
    return cached("yaml", (os.path.abspath(path), st.st_ino, st.st_size, st.st_mtime_ns), lambda: _parse(path))


def _parse(path: str) -> dict:
    with open(path) as f:
        return yaml.load(f, Loader=SAFE_LOADER) or {}  # noqa: S506 - a safe loader, C or Python


def saved_config(out_dir: str) -> dict | None:
    """The config.yaml a run wrote in `out_dir` (None where there is none, or it cannot be read)."""
    try:
        return load_yaml(os.path.join(out_dir, "config.yaml"))
    except (OSError, yaml.YAMLError):
        return None
