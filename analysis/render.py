"""What the analysis writes, and how: matplotlib (Agg) figures saved as PNG and a date-free PDF under an
experiment's figures/ folder, markdown tables, and `MissingRuns`, raised by any figure, table or section
whose runs are not in the results folder yet (the report prints it as "not reproduced here")."""

from __future__ import annotations

import math
import os
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend)
import numpy as np
import pandas as pd

from acco.config.experiments import experiment_dir

__all__ = [
    "MissingRuns",
    "figures_dir",
    "finish_figure",
    "plt",
    "save_figure",
    "saved_paths",
    "set_saved_paths",
    "to_markdown",
]


class MissingRuns(RuntimeError):
    """The results folder has no (or not enough) completed runs for this figure."""


def figures_dir(root: str, exp: str, scale: str) -> str:
    return os.path.join(experiment_dir(root, scale, exp), "figures")


def save_figure(fig, directory: str, name: str) -> list[str]:
    os.makedirs(directory, exist_ok=True)
    paths = []
    for ext in ("png", "pdf"):
        path = os.path.join(directory, f"{name}.{ext}")
        # no creation date in the PDF: the same results give byte-identical files (a clean git status)
        metadata = {"CreationDate": None} if ext == "pdf" else {}
        fig.savefig(path, dpi=120 if ext == "png" else None, bbox_inches="tight", metadata=metadata)
        paths.append(path)
    fig.saved_paths = paths
    return paths


def saved_paths(fig: Any) -> list[str]:
    """The paths `save_figure` wrote for `fig` (an attribute matplotlib's Figure does not declare)."""
    return fig.saved_paths


def set_saved_paths(fig: Any, paths: list[str]) -> None:
    fig.saved_paths = paths


def finish_figure(fig, root, exp, scale, save, name=None):
    """Save an experiment's figure as figures/<name or exp>.{png,pdf} (unless `save` is false)."""
    fig.saved_paths = []
    if save:
        save_figure(fig, figures_dir(root, exp, scale), name or exp)
    return fig


def _cell(v, floatfmt: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (float, np.floating)):
        return format(float(v), floatfmt)
    return str(v).replace("|", "\\|")


def to_markdown(df: pd.DataFrame, floatfmt: str = ".4g") -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for _, row in df.iterrows():
        lines.append("| " + " | ".join(_cell(row[c], floatfmt) for c in cols) + " |")
    return "\n".join(lines) + "\n"
