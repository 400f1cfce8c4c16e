"""Raw datasets through Hugging Face ``datasets``, always from local files: a copy on disk, or the
hub cache that ``experiments/prepare_data.py`` fills before any job starts.

``load_raw_dataset(hub_id, path, split, config_name, cache_dir)`` returns a ``datasets.Dataset``:

* ``path`` a folder written by ``Dataset.save_to_disk`` / ``DatasetDict.save_to_disk``: read with
  ``load_from_disk``; from a ``DatasetDict`` the ``split`` is picked (``valid``/``val``/``dev`` stand
  for ``validation``); a lone ``Dataset`` is returned whatever ``split`` asks;
* ``path`` a ``.jsonl`` / ``.json`` (lines or one JSON list) / ``.parquet`` / ``.txt`` (one document
  a line, datasets' ``text`` builder) file: the whole file, whatever ``split`` asks;
* ``path`` a folder of such files (e.g. what ``hf download --local-dir`` leaves): a subfolder
  named ``config_name`` is entered when there is one; the files whose relative path names the split
  (``train.jsonl``, ``data/train-00000-of-00004.parquet``, ``test/0000.parquet``,
  ``TinyStories-valid.txt`` ...) are read; when no file names any split, all files are read. When
  several kinds remain, one kind is used, by preference parquet > jsonl > json > txt. Hidden
  entries (``.cache/``) are ignored;
* no ``path``: the hub id's snapshot folder in the hub cache (``locate_hub_dataset``), read as the
  folder above, so a hub id and a local copy of the same files give the same dataset. Not in the
  cache: downloaded there when the hub is reachable (only the files ``KNOWN_DATASETS`` names, for
  a known id), else ``DataNotFoundError`` with one line that says how to fetch it. ``datasets``'
  own hub loading is not used: offline it reads only its own prepared Arrow cache, never the hub
  cache (datasets 5.2).

``cache_dir`` keeps datasets' own Arrow cache there (otherwise datasets' default cache is used).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import socket
from pathlib import Path
from urllib.parse import urlparse

from .cache import _visible

__all__ = [
    "KNOWN_DATASETS",
    "DataNotFoundError",
    "DatasetInfo",
    "available_splits",
    "check_hub_dataset",
    "data_hint",
    "hub_reachable",
    "load_raw_dataset",
    "locate_hub_dataset",
    "resolve_data_files",
    "source_files",
]


class DataNotFoundError(ValueError):
    """A dataset (or tokenizer) that is not available locally; the message is one line."""


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    hub_id: str
    text_field: str | None  # None: a structured dataset (Alpaca: instruction/input/output)
    split: str  # the split used by default
    local_dir: str  # suggested folder (relative to the repository) for a local copy
    config_name: str | None = None
    val_split: str | None = None  # the dataset's own held-out split, when it has one
    include: str | None = None  # what of the repository to download (hf download --include)
    fields: tuple[str, ...] = ()


KNOWN_DATASETS: dict[str, DatasetInfo] = {
    info.hub_id: info
    for info in (
        DatasetInfo(
            "roneneldan/TinyStories", "text", "train", "data/tinystories", val_split="validation", include="data/*"
        ),
        DatasetInfo("Skylion007/openwebtext", "text", "train", "data/openwebtext", include="data/*"),
        DatasetInfo(
            "tatsu-lab/alpaca",
            None,
            "train",
            "data/alpaca",
            include="data/*",
            fields=("instruction", "input", "output"),
        ),
        DatasetInfo(
            "EleutherAI/lambada_openai",
            "text",
            "test",
            "data/lambada_openai",
            config_name="default",
            include="default/*",
        ),
    )
}

_KINDS = {".parquet": "parquet", ".jsonl": "json", ".json": "json", ".txt": "text"}
_PREFERENCE = (".parquet", ".jsonl", ".json", ".txt")
_SPLIT_GROUPS = (("train", "training"), ("validation", "valid", "val", "dev"), ("test", "testing"))
_SPLIT_TOKENS = {t for group in _SPLIT_GROUPS for t in group}


def _one_line(text: object, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def data_hint(hub_id: str | None, config_key: str = "data.path") -> str:
    """What to do to get ``hub_id`` locally (one line, no trailing period)."""
    if hub_id is None:
        return (
            f"put the data there (a save_to_disk folder, or .jsonl/.json/.parquet/.txt files) "
            f"or set {config_key} to where it is"
        )
    info = KNOWN_DATASETS.get(hub_id)
    local = info.local_dir if info else "data/" + hub_id.split("/")[-1].lower()
    include = f" --include '{info.include}'" if info and info.include else ""
    return (
        f"run experiments/prepare_data.py with the same overrides where the hub is reachable (it fetches it "
        f'into the Hugging Face cache the jobs read), or run "hf download --repo-type dataset {hub_id}'
        f'{include} --local-dir {local}" on a machine with internet, copy it here and set {config_key}={local}'
    )


def hub_include(hub_id: str) -> list[str] | None:
    """The files of a known dataset's repository that are read (None: all of an unknown one's)."""
    info = KNOWN_DATASETS.get(hub_id)
    return [info.include] if info and info.include else None


def locate_hub_dataset(hub_id: str, config_key: str = "data.path") -> Path:
    """``hub_id``'s snapshot folder in the hub cache; downloaded there first when it is missing and
    the hub is reachable. Raises ``DataNotFoundError`` (one line) when it cannot be had."""
    from .hub import fetch_snapshot

    folder = check_hub_dataset(hub_id, config_key)
    if folder is not None:
        return folder
    try:
        return fetch_snapshot(hub_id, "dataset", hub_include(hub_id))
    except Exception as exc:  # noqa: BLE001 - any failure means: not available here
        raise DataNotFoundError(
            f"dataset {hub_id} could not be downloaded from the hub ({type(exc).__name__}: "
            f"{_one_line(exc, 160)}): {data_hint(hub_id, config_key)}"
        ) from exc


def check_hub_dataset(hub_id: str, config_key: str = "data.path") -> Path | None:
    """``hub_id``'s snapshot folder in the hub cache, or None when it is not there but the hub is
    reachable; ``DataNotFoundError`` (one line) when neither, i.e. ``locate_hub_dataset`` cannot give it."""
    from .hub import cached_snapshot, hub_cache_dir

    folder = cached_snapshot(hub_id, "dataset")
    if folder is None and not hub_reachable():
        raise DataNotFoundError(
            f"dataset {hub_id} is not in the Hugging Face cache {hub_cache_dir()} and the hub is not "
            f"reachable: {data_hint(hub_id, config_key)}"
        )
    return folder


def hub_reachable(timeout: float = 3.0) -> bool:
    """False when offline mode is on or a TCP connection to the Hub endpoint fails quickly."""
    from huggingface_hub import constants

    switches = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")  # read now, not at import
    if constants.HF_HUB_OFFLINE or any(os.environ.get(v, "").upper() in {"1", "ON", "YES", "TRUE"} for v in switches):
        return False
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return True  # cannot tell through a proxy: let datasets try
    url = urlparse(constants.ENDPOINT)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname, port), timeout=timeout).close()
        return True
    except OSError:
        return False


def _split_names(split: str) -> set[str]:
    s = split.lower()
    for group in _SPLIT_GROUPS:
        if s in group:
            return set(group)
    return {s}


def _tokens(rel: Path) -> set[str]:
    return {t for t in re.split(r"[^a-z]+", rel.as_posix().lower()) if t}


def _data_files(folder: Path) -> list[Path]:
    return sorted(
        f for f in folder.rglob("*") if f.is_file() and f.suffix.lower() in _KINDS and _visible(f.relative_to(folder))
    )


def _is_saved_dataset(p: Path) -> bool:
    return p.is_dir() and (
        (p / "dataset_dict.json").is_file() or ((p / "state.json").is_file() and (p / "dataset_info.json").is_file())
    )


def _config_folder(folder: Path, config_name: str | None) -> Path:
    if config_name and (folder / config_name).is_dir():
        return folder / config_name
    return folder


def available_splits(path: str | os.PathLike, config_name: str | None = None) -> list[str] | None:
    """The splits a local source distinguishes (canonical names), or None when it has none."""
    p = Path(path)
    if _is_saved_dataset(p):
        if (p / "dataset_dict.json").is_file():
            return list(json.loads((p / "dataset_dict.json").read_text())["splits"])
        return None
    if p.is_file():
        return None
    folder = _config_folder(p, config_name)
    found = set()
    for f in _data_files(folder):
        toks = _tokens(f.relative_to(folder))
        for group in _SPLIT_GROUPS:
            if toks & set(group):
                found.add(group[0])
    return sorted(found) or None


def resolve_data_files(
    path: str | os.PathLike, split: str | None, config_name: str | None = None
) -> tuple[str, list[str]]:
    """``(builder, files)`` for a local file or folder of files (not a save_to_disk folder)."""
    p = Path(path)
    if p.is_file():
        kind = _KINDS.get(p.suffix.lower())
        if kind is None:
            raise DataNotFoundError(
                f"unsupported data file {p}: use .jsonl, .json, .parquet or .txt (or a save_to_disk folder)"
            )
        return kind, [str(p)]
    folder = _config_folder(p, config_name)
    files = _data_files(folder)
    if not files:
        raise DataNotFoundError(
            f"no data files in {p}: expected a save_to_disk folder or .jsonl/.json/.parquet/.txt files"
        )
    if split is not None:
        wanted = _split_names(split)
        matching = [f for f in files if _tokens(f.relative_to(folder)) & wanted]
        if matching:
            files = matching
        elif any(_tokens(f.relative_to(folder)) & _SPLIT_TOKENS for f in files):
            raise DataNotFoundError(
                f"no {split!r} split in {p}: its files name the splits "
                f"{', '.join(available_splits(p, config_name) or [])}"
            )
    for suffix in _PREFERENCE:
        chosen = [str(f) for f in files if f.suffix.lower() == suffix]
        if chosen:
            return _KINDS[suffix], chosen
    raise AssertionError("unreachable")


def source_files(path: str | os.PathLike, splits: list[str | None], config_name: str | None = None) -> list[list]:
    """``[[relative name, size], ...]`` of the files a source at ``path`` reads for ``splits`` (every
    visible file of a save_to_disk folder): what the data is, wherever the copy lies. Sizes follow
    symbolic links (the hub cache's snapshot files point at its blobs)."""
    p = Path(path).expanduser()
    if p.is_file():
        return [[p.name, p.stat().st_size]]
    if _is_saved_dataset(p):
        files = [f for f in p.rglob("*") if f.is_file() and _visible(f.relative_to(p))]
    else:
        files = sorted({Path(f) for split in splits for f in resolve_data_files(p, split, config_name)[1]})
    return sorted([f.relative_to(p).as_posix(), f.stat().st_size] for f in files)


def _from_disk(p: Path, split: str | None):
    import datasets

    loaded = datasets.load_from_disk(str(p))
    if isinstance(loaded, datasets.DatasetDict):
        names = list(loaded.keys())
        if split is None:
            if len(names) == 1:
                return loaded[names[0]]
            raise DataNotFoundError(f"{p} holds the splits {', '.join(names)}: choose one")
        for name in [split] + sorted(_split_names(split) - {split}):
            if name in loaded:
                return loaded[name]
        raise DataNotFoundError(f"no {split!r} split in {p}: it holds {', '.join(names)}")
    return loaded


def load_raw_dataset(
    hub_id: str | None,
    path: str | None,
    split: str | None = "train",
    config_name: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    *,
    config_key: str = "data.path",
):
    """The raw ``datasets.Dataset`` of a source (see the module docstring).

    ``config_key`` is the configuration key named in the error messages.
    """
    import datasets

    cache = None if cache_dir is None else str(cache_dir)
    if path is not None:
        p = Path(path).expanduser()
        if not p.exists():
            what = f"dataset {hub_id}" if hub_id else "dataset"
            raise DataNotFoundError(
                f"{what} not found at {path} (no such file or folder): {data_hint(hub_id, config_key)}"
            )
        if _is_saved_dataset(p):
            return _from_disk(p, split)
        builder, files = resolve_data_files(p, split, config_name)
        return datasets.load_dataset(builder, data_files=files, split="train", cache_dir=cache)

    if not hub_id:
        raise DataNotFoundError(f"no dataset given: set {config_key} to a local copy (or a hub id)")
    return load_raw_dataset(hub_id, str(locate_hub_dataset(hub_id, config_key)), split, config_name, cache_dir)
