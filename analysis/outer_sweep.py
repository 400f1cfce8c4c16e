"""The outer optimizer's sweep (experiment outer_sweep): DiLoCo's and Streaming DiLoCo's final loss
over a grid of outer learning rates and Nesterov momenta, per local schedule (method and H), on
tuning seeds, and the settings beyond_diloco's rule picks from it (conf/experiment_info/
beyond_diloco.yaml `outer_choice`: the lowest mean final training loss; a tie, equal to 4 decimals,
goes to the paper's settings, then to the smaller momentum).

`grid(root, scale)` gives one row per schedule and setting, `chosen(...)` the rule's pick per
schedule, `figure(...)` a heat map per schedule, `section(...)` the report's lines, which also
check that beyond_diloco's configuration runs the chosen settings."""

from __future__ import annotations

import numpy as np

from acco.runtime.summary import RunSummary
from analysis.load import Run, discover_runs, is_local, schedule_name, spec_of
from analysis.measures import final_loss
from analysis.render import MissingRuns, finish_figure, plt

EXP = "outer_sweep"
PAPER = (0.7, 0.9)


def schedule(run: Run) -> str:
    """A local schedule: the method and what shapes its rounds (not its outer optimizer)."""
    return schedule_name(run.method, run.config.get("method") or {})


def outer_setting(run: Run) -> tuple[float, float]:
    m = run.config.get("method") or {}
    return float(m["outer_lr"]), float(m["outer_momentum"])


def grid(root: str, scale: str = "cpu") -> list[dict]:
    runs = [r for r in discover_runs(root, EXP, scale) if is_local(spec_of(r.method))]
    if not runs:
        raise MissingRuns(f"no completed {EXP} runs at scale {scale}")
    out = []
    for sched in sorted({schedule(r) for r in runs}):
        mine = [r for r in runs if schedule(r) == sched]
        for lr, mu in sorted({outer_setting(r) for r in mine}):
            at = [r for r in mine if outer_setting(r) == (lr, mu)]
            finals = [final_loss(r) for r in at]
            out.append(
                {
                    "schedule": sched,
                    "outer_lr": lr,
                    "outer_momentum": mu,
                    "seeds": sorted(int(r.info["seed"]) for r in at),
                    "final": float(np.mean(finals)),
                    "worst": float(np.max(finals)),
                }
            )
    return out


def chosen(root: str, scale: str = "cpu") -> dict[str, tuple[float, float]]:
    """The rule's pick per schedule: the lowest mean final loss (ties at 4 decimals: the paper's
    settings, then the smaller momentum, then the smaller rate)."""
    picks: dict[str, tuple[float, float]] = {}
    rows = grid(root, scale)
    for sched in sorted({r["schedule"] for r in rows}):
        mine = [r for r in rows if r["schedule"] == sched]
        best = min(
            mine,
            key=lambda r: (
                round(r["final"], 4),
                (r["outer_lr"], r["outer_momentum"]) != PAPER,
                r["outer_momentum"],
                r["outer_lr"],
            ),
        )
        picks[sched] = (best["outer_lr"], best["outer_momentum"])
    return picks


def configured(scale: str = "cpu") -> dict[str, set[tuple[float, float]]]:
    """The outer settings beyond_diloco's run list gives each local schedule's dynamics runs."""
    from acco.config.experiments import compose, expand_runs, experiment_block

    out: dict[str, set[tuple[float, float]]] = {}
    for overrides in expand_runs(experiment_block("beyond_diloco", scale)):
        cfg = compose([f"experiment=beyond_diloco/{scale}", *overrides])
        m = cfg["method"]
        if not is_local(spec_of(m["name"])) or cfg["train"].get("steps") != 300:
            continue
        run = Run("", "beyond_diloco", scale, "", cfg, RunSummary(method=m["name"]))
        out.setdefault(schedule(run), set()).add((float(m["outer_lr"]), float(m["outer_momentum"])))
    return out


def section(root: str, scale: str = "cpu") -> list[str]:
    rows = grid(root, scale)
    picks = chosen(root, scale)
    lines = [
        "DiLoCo's outer optimizer (SGD with Nesterov momentum, lr 0.7 and momentum 0.9 in its paper, tuned there "
        "for H ≈ 500 inner steps from a pretrained start) over a grid, per local schedule, on tuning seeds that "
        "beyond_diloco's comparison does not use; beyond_diloco's rule (written before the runs, "
        "`conf/experiment_info/beyond_diloco.yaml` outer_choice) takes the lowest mean final training loss.",
        "",
        "| schedule | outer lr | momentum | seeds | final loss (mean) | worst seed | chosen |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        mark = "**yes**" if picks.get(r["schedule"]) == (r["outer_lr"], r["outer_momentum"]) else ""
        paper = " (paper's)" if (r["outer_lr"], r["outer_momentum"]) == PAPER else ""
        lines.append(
            f"| {r['schedule']} | {r['outer_lr']:g} | {r['outer_momentum']:g}{paper} | "
            f"{', '.join(map(str, r['seeds']))} | {r['final']:.3f} | {r['worst']:.3f} | {mark} |"
        )
    if scale == "cpu":
        have = configured(scale)
        for sched, pick in sorted(picks.items()):
            runs_at = have.get(sched, set())
            if pick in runs_at:
                lines.append(f"- {sched}: beyond_diloco runs the chosen outer lr {pick[0]:g}, momentum {pick[1]:g}.")
            else:
                lines.append(
                    f"- {sched}: the rule chooses outer lr {pick[0]:g}, momentum {pick[1]:g}; **beyond_diloco does not "
                    f"run it yet** (its dynamics runs use {sorted(runs_at) or 'none'})."
                )
    return lines + [""]


def figure(root: str, scale: str = "cpu", save: bool = True):
    rows = grid(root, scale)
    scheds = sorted({r["schedule"] for r in rows})
    picks = chosen(root, scale)
    fig, axes = plt.subplots(1, len(scheds), figsize=(4.4 * len(scheds), 3.8), squeeze=False)
    for ax, sched in zip(axes[0], scheds):
        mine = [r for r in rows if r["schedule"] == sched]
        lrs = sorted({r["outer_lr"] for r in mine})
        mus = sorted({r["outer_momentum"] for r in mine})
        data = np.full((len(mus), len(lrs)), np.nan)
        for r in mine:
            data[mus.index(r["outer_momentum"]), lrs.index(r["outer_lr"])] = r["final"]
        im = ax.imshow(data, origin="lower", cmap="viridis_r", aspect="auto")
        for i, mu in enumerate(mus):
            for j, lr in enumerate(lrs):
                star = " *" if picks.get(sched) == (lr, mu) else ""
                ax.text(j, i, f"{data[i, j]:.3f}{star}", ha="center", va="center", fontsize=8, color="white")
        ax.set_xticks(range(len(lrs)), [f"{x:g}" for x in lrs])
        ax.set_yticks(range(len(mus)), [f"{x:g}" for x in mus])
        ax.set_xlabel("outer learning rate")
        ax.set_ylabel("outer Nesterov momentum")
        ax.set_title(sched, fontsize=9)
        fig.colorbar(im, ax=ax, shrink=0.8, label="final training loss (mean of tuning seeds)")
    fig.suptitle("Outer optimizer sweep — the lowest mean final loss (*) is the setting beyond_diloco runs")
    fig.tight_layout()
    return finish_figure(fig, root, EXP, scale, save)
