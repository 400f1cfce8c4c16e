"""Figures are reproducible artifacts: the same data drawn twice, a second apart, gives byte-identical
PNG and PDF files (no creation date inside), so regenerating committed figures leaves git clean."""

from __future__ import annotations

import time

from analysis.render import plt, save_figure


def draw():
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1, 2], [3.0, 2.0, 1.5], label="DDP")
    ax.legend()
    return fig


def test_the_same_figure_saved_twice_is_the_same_bytes(tmp_path):
    first = save_figure(draw(), str(tmp_path / "a"), "f")
    time.sleep(1.1)  # a PDF creation date has one-second resolution
    second = save_figure(draw(), str(tmp_path / "b"), "f")
    assert [p.rsplit(".", 1)[1] for p in first] == ["png", "pdf"]
    for a, b in zip(first, second):
        with open(a, "rb") as fa, open(b, "rb") as fb:
            assert fa.read() == fb.read(), a
