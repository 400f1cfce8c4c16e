#!/usr/bin/env python
"""Plot any set of runs: loss against steps, samples and wall-clock, and a table of final numbers.

    python analysis/plot_runs.py results/sweeps/fig5-cpu_method=ddp,dpu,acco_train.steps=20
    python analysis/plot_runs.py 'results/runs/*_acco*' results/cpu/fig5/ddp_seed=0 --out /tmp/mine
    python analysis/plot_runs.py results/.multirun/2026-01-05_10-00-00 --by method    # a colour per method
    make plot RUNS=results/sweeps/<sweep>

Each argument is a run folder (config.yaml + metrics.csv), a folder holding runs at any depth (a
sweep's folder, an experiment's, a whole results root) or a glob of either. Every run is one line,
labelled by what sets it apart from the others (the settings that differ between them, from each
run's config.yaml); `--by KEY` (method, seed, optim.lr, ...) colours the lines by one setting instead.
Writes runs.png and runs.pdf (three panels: training loss, and validation loss where evaluated,
against committed steps, samples and wall-clock seconds; a run on the virtual clock is marked, its
seconds are modelled) and runs.md (the table) to `--out`, and prints the table. By default they go
to plots/ in the folder the runs share (of one run: the folder holding it); for runs under the
committed results (results/cpu, bench, gpu, sim), which only their own commands write, to
results/plots/<that folder, its path joined by _>, e.g. results/plots/cpu_fig5. Exit code 2 when no
run is found.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from acco.config.experiments import dotted_leaves
from acco.runtime.summary import read_summary
from analysis.load import _read_yaml, clock_of, metrics_frame
from analysis.render import save_figure

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMITTED = ("cpu", "bench", "gpu", "sim")  # results/<these> are tracked (.gitignore)
X_AXES = (("step", "committed steps"), ("samples", "samples"), ("wall_time_s", "wall-clock seconds"))
# settings that differ between runs without saying how they differ: where they ran and were written
NOT_A_DIFFERENCE = ("out_dir", "results_root", "experiment", "data.cache_dir", "model.pretrained_path", "link.runtime")


def run_folders(paths: list[str]) -> list[str]:
    """Every run folder (a config.yaml and a metrics.csv inside) the paths name or hold, each once,
    sorted; hidden folders (.multirun's Hydra files, .submitit logs) are looked into for runs too."""
    found: list[str] = []
    for pattern in paths:
        matches = glob.glob(pattern) or ([pattern] if os.path.exists(pattern) else [])
        for path in matches:
            for folder, dirs, files in os.walk(path):
                if "config.yaml" in files and "metrics.csv" in files:
                    found.append(os.path.normpath(folder))
                    dirs[:] = []  # a run folder holds no runs (checkpoints/, model/)
                dirs.sort()
    return sorted(dict.fromkeys(found))


def differences(configs: list[dict]) -> list[str]:
    """The settings (dotted keys) whose values are not the same in every run."""
    leaves = [dotted_leaves(c) for c in configs]
    keys = sorted(set().union(*leaves)) if leaves else []
    skip = lambda k: any(k == n or k.startswith(n + ".") for n in NOT_A_DIFFERENCE) or k.startswith("_")  # noqa: E731
    return [k for k in keys if not skip(k) and len({repr(leaf.get(k)) for leaf in leaves}) > 1]


def labels(configs: list[dict], folders: list[str]) -> list[str]:
    """What sets each run apart: the method first, then the differing settings (short: the last part
    of a key); the folder's name when nothing in the configs differs."""
    keys = differences(configs)
    by_method: dict = {}
    for cfg in configs:
        by_method.setdefault(dotted_leaves(cfg).get("method.name"), []).append(cfg)
    # a method's own setting (dpu's warmup, ddp's impl) only where runs of that method differ in it
    keys = [
        k
        for k in keys
        if not k.startswith("method.") or k == "method.name" or any(k in differences(g) for g in by_method.values())
    ]
    out = []
    for cfg, folder in zip(configs, folders):
        leaves = dotted_leaves(cfg)
        parts = [str(leaves.get("method.name", ""))] if "method.name" in keys else []
        parts += [
            f"{k.rsplit('.', 1)[-1]}={leaves[k]}" for k in keys if k != "method.name" and leaves.get(k) is not None
        ][:4]
        out.append(" ".join(p for p in parts if p) or os.path.basename(folder))
    if len(set(out)) < len(out):  # the same settings twice (a run made again elsewhere): tell them apart
        out = [f"{label} ({os.path.basename(folder)})" for label, folder in zip(out, folders)]
    return out


def final_numbers(folder: str, cfg: dict) -> dict:
    summary = read_summary(folder)
    metrics = metrics_frame(os.path.join(folder, "metrics.csv"))
    last = metrics.iloc[-1] if len(metrics) else None
    evals = metrics["eval_loss"].dropna()
    return {
        "status": summary.status if summary else "running?" if last is not None else "no steps",
        "steps": int(last["step"]) if last is not None else 0,
        "samples": int(last["samples"]) if last is not None else 0,
        "wall_s": float(last["wall_time_s"]) if last is not None else float("nan"),
        "train_loss": float(last["train_loss"]) if last is not None else float("nan"),
        "eval_loss": float(evals.iloc[-1]) if len(evals) else float("nan"),
        "clock": clock_of(cfg),
    }


def table(rows: list[dict]) -> str:
    head = "| run | status | steps | samples | wall s | final train loss | final eval loss |"
    lines = [head, "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        wall = f"{r['wall_s']:.1f}" + (" (modelled)" if r["clock"] == "virtual" else "")
        lines.append(
            f"| {r['label']} | {r['status']} | {r['steps']} | {r['samples']} | {wall} | "
            f"{r['train_loss']:.4f} | {r['eval_loss']:.4f} |".replace("nan", "–")
        )
    return "\n".join(lines)


def plot(folders: list[str], out_dir: str, by: str | None = None) -> tuple[list[str], str]:
    """The figure (runs.png, runs.pdf) and the table (runs.md) in `out_dir`: (paths, table text)."""
    configs = [_read_yaml(os.path.join(f, "config.yaml")) for f in folders]
    names = labels(configs, folders)
    if by and configs and by not in dotted_leaves(configs[0]) and f"{by}.name" in dotted_leaves(configs[0]):
        by = f"{by}.name"  # --by method: the method's name
    colour_of: dict[str, str] = {}
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), sharey=True)
    rows = []
    for folder, cfg, name in zip(folders, configs, names):
        metrics = metrics_frame(os.path.join(folder, "metrics.csv"))
        key = str(dotted_leaves(cfg).get(by)) if by else name
        colour = colour_of.setdefault(key, f"C{len(colour_of) % 10}")
        virtual = clock_of(cfg) == "virtual"
        for ax, (column, _) in zip(axes, X_AXES):
            if metrics.empty:
                continue
            ax.plot(metrics[column], metrics["train_loss"], color=colour, lw=1.2, alpha=0.9, ls=":" if virtual else "-")
            evals = metrics.dropna(subset=["eval_loss"])
            if len(evals):
                ax.plot(evals[column], evals["eval_loss"], color=colour, lw=0, marker="o", ms=3)
        rows.append({"label": name, **final_numbers(folder, cfg)})
        axes[0].plot([], [], color=colour, label=name if not by else None)
    if by:
        for key, colour in colour_of.items():
            axes[0].plot([], [], color=colour, label=f"{by}={key}")
    for ax, (_, title) in zip(axes, X_AXES):
        ax.set_xlabel(
            title
            + (
                " (dotted: modelled, virtual clock)"
                if title.startswith("wall") and any(r["clock"] == "virtual" for r in rows)
                else ""
            )
        )
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("training loss (lines), validation loss (dots)")
    axes[0].legend(fontsize=7, loc="upper right")
    fig.suptitle(f"{len(folders)} run(s)", fontsize=10)
    paths = save_figure(fig, out_dir, "runs")
    plt.close(fig)
    text = table(rows)
    md = os.path.join(out_dir, "runs.md")
    with open(md, "w") as f:
        f.write("Runs:\n\n" + "\n".join(f"- {n}: {f}" for n, f in zip(names, folders)) + "\n\n" + text + "\n")
    return [*paths, md], text


def default_out(folders: list[str]) -> str:
    """<the folder the runs share>/plots (a sweep's own folder), except under the committed results
    (results/cpu, bench, gpu, sim), which only their own commands write: results/plots/<that folder>."""
    common = os.path.commonpath([os.path.abspath(f) for f in folders])
    if len(folders) == 1:
        common = os.path.dirname(common)
    results = os.path.join(ROOT, "results")
    for tracked in COMMITTED:
        if common == os.path.join(results, tracked) or common.startswith(os.path.join(results, tracked) + os.sep):
            return os.path.join(results, "plots", os.path.relpath(common, results).replace(os.sep, "_"))
    return os.path.join(common, "plots")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("paths", nargs="+", help="run folders, folders holding runs, or globs of either")
    ap.add_argument(
        "--out", help="where runs.png/.pdf/.md go (default: <the runs' common folder>/plots, or results/plots/...)"
    )
    ap.add_argument("--by", help="colour the lines by one setting (a dotted key: method.name, seed, optim.lr)")
    args = ap.parse_args(argv)
    folders = run_folders(args.paths)
    if not folders:
        print(f"error: no run folder (config.yaml and metrics.csv) in {' '.join(args.paths)}", file=sys.stderr)
        return 2
    paths, text = plot(folders, args.out or default_out(folders), args.by)
    print(text)
    for path in paths:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
