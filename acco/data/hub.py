"""The Hugging Face hub cache: where a job finds what `experiments/prepare_data.py` fetched.

A hub id (a dataset's, a tokenizer's) is read from the hub client's own cache, laid out as the
client lays it out (``datasets--org--name/snapshots/<revision>/...``, ``refs/main``), in the folder
the client itself uses: ``HF_HUB_CACHE``, else ``HF_HOME/hub``, else ``~/.cache/huggingface/hub``.
``hf download <id>`` (no ``--local-dir``) fills the same folder. A compute node without internet
(``HF_HUB_OFFLINE=1``) resolves a hub id there with no network call at all; the login node fills
it (``fetch_snapshot``) before any job starts.

The folder is read from the environment at each call: huggingface_hub reads it once, at import,
and a process forked from a pre-imported parent (the test harness's fork server) may carry another.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cached_snapshot", "fetch_snapshot", "hub_cache_dir"]


def hub_cache_dir() -> str:
    """The hub client's cache folder, as huggingface_hub.constants computes it (now, from the env)."""
    home = os.getenv("HF_HOME") or os.path.join(
        os.getenv("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "huggingface"
    )
    hub = os.getenv("HF_HUB_CACHE") or os.getenv("HUGGINGFACE_HUB_CACHE") or os.path.join(home, "hub")
    return os.path.expandvars(os.path.expanduser(hub))


def cached_snapshot(repo_id: str, repo_type: str = "dataset") -> Path | None:
    """The snapshot folder of ``repo_id``'s main revision in the hub cache, or None; never the network."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        folder = snapshot_download(repo_id, repo_type=repo_type, cache_dir=hub_cache_dir(), local_files_only=True)
    except LocalEntryNotFoundError:
        return None
    return Path(folder)


def fetch_snapshot(
    repo_id: str, repo_type: str = "dataset", include: list[str] | None = None, local_dir: str | None = None
) -> Path:
    """Download ``repo_id`` (only the files ``include`` matches, when given) into the hub cache, or
    into ``local_dir`` (what ``hf download --local-dir`` leaves); returns the folder."""
    from huggingface_hub import snapshot_download

    folder = snapshot_download(
        repo_id,
        repo_type=repo_type,
        allow_patterns=include,
        cache_dir=hub_cache_dir(),
        local_dir=local_dir,
    )
    return Path(folder)
