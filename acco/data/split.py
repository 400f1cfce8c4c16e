"""The document-level train/validation split of the data pipelines.

``split_indices(n, val_fraction, seed)``: ``round(val_fraction * n)`` validation documents drawn
with ``seed`` (a ``random.Random`` seeded with a string: stable across Python versions and
platforms), both index lists sorted. It holds two Python lists of ``n`` ints: fine for the
instruction data and small corpora.

``split_roles(keep, val_fraction, seed)`` is the same split as a ``uint8`` array over all the
documents of a source, for corpora of millions of documents: ``DROPPED`` for a document not
kept (an empty one), else ``TRAIN`` or ``VAL``, where the kept documents are split exactly as
``split_indices(n_kept, ...)`` splits them. Its memory is O(documents), not O(tokens): the result
is 1 byte a document, and while it is computed the kept positions (8 bytes a kept document) and
the shuffled order (4 bytes a kept document below 2**32 documents: the same ``shuffle`` applied to
an ``array`` instead of a list) are held too: about 110 MB for OpenWebText's 8 M documents.
"""

from __future__ import annotations

import random
from array import array

import numpy as np

__all__ = ["DROPPED", "TRAIN", "VAL", "split_indices", "split_roles"]

DROPPED, TRAIN, VAL = 0, 1, 2


def _rng(seed: int) -> random.Random:
    return random.Random(f"acco-val-split:{seed}")


def split_indices(n: int, val_fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """Document-level split: ``round(val_fraction * n)`` validation documents drawn with ``seed``;
    both index lists sorted (the story pipeline's split, unchanged)."""
    order = list(range(n))
    _rng(seed).shuffle(order)
    n_val = int(round(val_fraction * n))
    return sorted(order[n_val:]), sorted(order[:n_val])


def _shuffled_range(n: int, seed: int) -> np.ndarray:
    """``range(n)`` shuffled exactly as ``split_indices`` shuffles its list (``Random.shuffle``
    only reads ``len`` and swaps items, so a compact ``array`` gives the same permutation)."""
    typecode = "I" if n < 2**32 and array("I").itemsize == 4 else "Q"
    order = array(typecode, range(n))
    _rng(seed).shuffle(order)
    return np.frombuffer(order, dtype=np.uint32 if order.itemsize == 4 else np.uint64)


def split_roles(keep: np.ndarray, val_fraction: float, seed: int) -> np.ndarray:
    """``uint8`` role of every document: ``DROPPED`` where ``keep`` is False; among the kept ones,
    the ``k``-th is ``VAL`` exactly when ``k`` is in ``split_indices(n_kept, val_fraction, seed)[1]``."""
    keep = np.asarray(keep, dtype=bool)
    roles = np.where(keep, np.uint8(TRAIN), np.uint8(DROPPED)).astype(np.uint8)
    kept = np.flatnonzero(keep)
    n_val = int(round(val_fraction * len(kept)))
    if n_val:
        roles[kept[_shuffled_range(len(kept), seed)[:n_val]]] = VAL
    return roles
