"""Pretraining data at OpenWebText scale (issue 11, defect 3): the split as a compact role array,
token files (uint16/uint32) written chunk by chunk and read through a memory map, a build whose
result does not depend on its number of tokenizer processes, and whose peak memory does not grow
with the number of tokens.

Here the tests that start processes (marked integration); the in-process ones are in
tests/unit/test_data_memmap.py."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

try:
    import acco.data  # noqa: F401
except ImportError:  # plain `pytest` without the project root on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from acco.data import (
    train_bpe_tokenizer,
)
from acco.data.cache import quiet_datasets
from tests.helpers import paths

ROOT = Path(paths.ROOT)


MB = 2**20


# ----------------------------------------------------------------------------------------------
# peak memory of a build does not grow with the number of tokens
# ----------------------------------------------------------------------------------------------
# The bound: a build holds batches and per-document arrays (1 byte a document, ~14 while
# splitting: < 1 MB here), nothing per token. Its peak is the largest sum over time of the
# proportional anonymous memory (Pss_Anon) of the build process and its worker processes. The larger
# corpus' peak may exceed the smaller one's by at most BOUND_MB (allocators retain a few MB more or
# less from run to run) while the corpus grows by ~9.5 M tokens, over which the in-memory build of
# cache format 1 (int64 ids in an Arrow table, an int64 stream, the block tensor: ~17 bytes a token
# measured) grows by ~160-190 MB. The pages of the memory-mapped Arrow files a build reads are clean
# page cache that the kernel reclaims under pressure; they count in VmHWM, which is only reported.
BOUND_MB = 48


SMALL_WORDS, LARGE_WORDS = 2_000_000, 8_000_000


_BUILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
from acco.data import prepare_pretraining_data
d = prepare_pretraining_data({"path": sys.argv[2]}, {"kind": "pretrained", "path": sys.argv[3]}, 256, 0.05, 0,
                             sys.argv[4], num_proc=2)
print(json.dumps({"tokens": (len(d.train_blocks) + len(d.val_blocks)) * 256}))
"""


def _corpus(folder: Path, n_words: int, words: list[str]) -> None:
    """OpenWebText's schema ({"text"}), saved with datasets' save_to_disk in 16 MB shards."""
    import datasets

    g = np.random.default_rng(n_words)
    vocab = np.array(words, dtype=object)
    texts, total = [], 0
    while total < n_words:
        k = int(g.integers(200, 1500))
        texts.append(" ".join(vocab[g.integers(0, len(vocab), k)]) + ".")
        total += k
    with quiet_datasets():
        datasets.Dataset.from_dict({"text": texts}).save_to_disk(str(folder), max_shard_size="16MB")


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            pass  # the process is gone
    return out


def _anon_kb(pid: int) -> int:
    """Proportional anonymous memory (forked workers share their parent's pages: each counts its
    part). File pages of the memory-mapped Arrow and token files are not counted: they are clean
    page cache, which the kernel reclaims under memory pressure."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("Pss_Anon:"))
    except (OSError, StopIteration):
        return 0


def _vm_hwm_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return 0


def _peak_of_build(args: list[str], log: Path) -> dict:
    """Run a build in a subprocess; sample the anonymous memory of it and its workers together
    (``peak_mb``), and, for the report, the largest VmHWM of one of them (RSS with file pages)."""
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", _BUILD, *args], stdout=out, stderr=subprocess.STDOUT)
        peak = hwm = samples = 0
        while proc.poll() is None:
            pids = _tree(proc.pid)
            peak = max(peak, sum(_anon_kb(p) for p in pids))
            hwm = max([hwm] + [_vm_hwm_kb(p) for p in pids])
            samples += 1
            time.sleep(0.01)
    out = log.read_text()
    assert proc.returncode == 0, out[-3000:]
    return {
        "peak_mb": round(peak / 1024, 1),
        "vm_hwm_mb": round(hwm / 1024, 1),
        "samples": samples,
        "tokens": json.loads(out.strip().splitlines()[-1])["tokens"],
    }


def _can_measure() -> bool:
    try:
        with open(f"/proc/self/task/{os.getpid()}/children"):
            pass
        return _anon_kb(os.getpid()) > 0
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.skipif(not _can_measure(), reason="needs Linux /proc/<pid>/smaps_rollup (Pss_Anon) and task children")
def test_build_peak_memory_does_not_grow_with_tokens(tmp_path):
    from transformers import PreTrainedTokenizerFast

    r = random.Random(0)
    words = sorted(
        {"".join(r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(r.randint(2, 8))) for _ in range(2000)}
    )
    # a pretrained-style byte-level BPE (as GPT-Neo's for OpenWebText), saved as a folder
    train_bpe_tokenizer([" ".join(r.choice(words) for _ in range(300)) for _ in range(300)], 4096, tmp_path / "t.json")
    PreTrainedTokenizerFast(
        tokenizer_file=str(tmp_path / "t.json"),
        eos_token="<|endoftext|>",
        bos_token="<|endoftext|>",
        unk_token="<|endoftext|>",
    ).save_pretrained(str(tmp_path / "tok"))
    runs = {}
    for name, n_words in (("small", SMALL_WORDS), ("large", LARGE_WORDS)):
        _corpus(tmp_path / name, n_words, words)
        args = [str(ROOT), str(tmp_path / name), str(tmp_path / "tok"), str(tmp_path / f"cache-{name}")]
        runs[name] = _peak_of_build(args, tmp_path / f"{name}.log")
    small, large = runs["small"], runs["large"]
    report = f"small {small}, large {large}"
    print(report)
    assert small["samples"] >= 20 and large["samples"] >= 20, report  # the sampler ran all along
    assert small["peak_mb"] > 100, report  # it measured the build (python, torch, datasets: > 100 MB)
    extra_tokens = large["tokens"] - small["tokens"]
    assert large["tokens"] > 3.5 * small["tokens"] and 16 * extra_tokens > 2.5 * BOUND_MB * MB, report
    assert large["peak_mb"] - small["peak_mb"] < BOUND_MB, report
