"""Where acco's config and its defaults are: the folder acco/conf, shipped inside the package
(package data in pyproject.toml), so an installed acco (pip install ., not editable) finds them
without the clone. The clone's top-level conf/ is a link to it: the folder users, Hydra's
--config-path and experiments/ see. Every reader asks `conf_dir()`; nothing else locates it."""

from __future__ import annotations

import os


def conf_dir() -> str:
    """The folder of config.yaml and its groups (method, model, data, launcher, logger, experiment)."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "conf")
