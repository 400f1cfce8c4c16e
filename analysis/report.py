"""REPORT.md for one scale of a results folder: every figure and table beside the paper's claim, the
numbers that test the claim, and a verdict computed from those numbers by a rule the report states.

    python analysis/report.py results --scale cpu        # -> results/cpu/REPORT.md

Everything comes from the results folder (and the paper's numbers kept in conf/experiment_info/*.yaml);
nothing is typed in by hand, so a re-run of the experiments rewrites the report honestly.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from typing import Any, cast

import numpy as np
import pandas as pd

from acco.analytic.costmodel import table3_rows
from acco.atomic import atomic_write
from acco.config.experiments import experiment_block, experiment_dir, run_specs
from acco.harness.bench.measure import rank_rates
from analysis import beyond_diloco, lr_sweep, outer_sweep
from analysis.claims import METRICS, claim_clock, claims_of, evaluate, resolve, runs_for, selected
from analysis.clock_report import clock_section
from analysis.comparisons import Group, describe_runs, network_of, peak_lr, pick
from analysis.figures import FIGURES, fig4_data
from analysis.forest import image_line, write_forest
from analysis.headline import (
    KIND_TITLES,
    KINDS,
    build_rows,
    cell_text,
    counts,
    decided_against,
    family_size,
    forest_rows,
)
from analysis.ladder import budget_of, rungs
from analysis.load import ACCO, BASELINE, DPU, OVERLAPPED_DDP, WP, Run, discover_runs, loaded_once
from analysis.measures import TAIL, final_eval_loss, final_loss, loss_at_fraction, samples_per_s
from analysis.provenance import code_commit, host_line
from analysis.render import MissingRuns, figures_dir
from analysis.sim_figures import simulation_section
from analysis.stats import ALPHA, Look, PairedGap, Verdict, rule_text
from analysis.tables import (
    SMOOTH_STEPS,
    paired_times,
    reduction_ci_text,
    table1,
    table2,
    table3,
    tables_dir,
    target_column,
)

WIDTH = 110  # the report's prose, wrapped for a reader of the raw file


def stated(v: Verdict, gap: PairedGap, what: str) -> str:
    """'**matches** (+0.4 % [−1.1, +1.9] (n = 5))' and, for a comparison short of seeds, how many."""
    return f"**{v.value}** ({what}: {gap.describe()})"


def verdict(ok: bool | None) -> str:
    """A shape check that is not a comparison of methods over seeds (fig4's trend)."""
    return {True: "**agrees**", False: "**disagrees**", None: "**inconclusive**"}[ok]


def look_text(o) -> str:
    """'look 1 of 2 (n = 5), 97.5 % interval: +1.3 % [−0.4, +3.0] (n = 5); sign: 0 inside; size: within
    ±1.8 %' for a claim's outcome (analysis/claims.py ClaimOutcome)."""
    look = o.look
    points = " (percentage points)" if o.claim.versus else ""
    return (
        f"{look.describe_look()}, {look.gap.confidence:.1%} interval: {look.gap.describe()}{points}; "
        f"sign: {look.sign.value}; size: {size_text(look)}"
    )


def size_text(look: Look) -> str:
    """'within ±1.80 %' (the Size with its margin), or 'no margin'."""
    m = look.margin_pct
    return look.size.value.replace("m", f"{m:.2f} %") if m == m else "no margin"


def claim_lines(root: str, scale: str, exp: str) -> list[str]:
    """One line per claim of the experiment (analysis/claims.py), by the rule at the top: the two
    means, the look the verdict was taken at with its interval, the sign and the size against the
    metric's margin (and how it was computed), the verdict against the paper's."""
    claims = claims_of(experiment_block(exp, scale), scale)
    runs = runs_for(claims, root, exp, scale)
    out = []
    for c in claims:
        o = evaluate(c, runs[claim_clock(c)])
        what = METRICS[c.metric].label + (f" minus the gap on the {METRICS[c.versus].label}" if c.versus else "")
        if o.verdict is None or o.look is None:
            out.append(f"- {c.name} ({what}): not run at this scale.")
            continue
        seeds = ", ".join(f"seed {sd} {g:+.1f}" for sd, g in zip(o.look.gap.seeds, o.look.gap.gaps_pct))
        done = (
            f"no verdict, {o.unvalidated}"
            if o.verdict is Verdict.UNVALIDATED
            else {True: "reproduced", False: "**not reproduced**", None: "not decided yet"}[o.reproduced]
        )
        out.append(
            f"- {c.name} ({c.question}: {what}; the paper's claim is one of {c.tests}; A {o.mean_a:.4g}, "
            f"B {o.mean_b:.4g}): **{o.verdict.value}** at {look_text(o)} (margin: {c.margin_how()}); "
            f"the paper implies *{c.expect.value}* ({c.paper}): {done}. Per seed (A vs B, %): {seeds}."
        )
        if o.reproduced is False and c.if_not_reproduced:
            out.append(f"  - Why: {c.if_not_reproduced.strip()}")
    return out


def table(rows: list[dict]) -> list[str]:
    if not rows:
        return []
    cols = list(rows[0])
    out = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    out += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows]
    return out + [""]


def runs_of(root: str, exp: str, scale: str) -> list[Run]:
    """An experiment's completed runs; MissingRuns (the report's "not reproduced here") if it has none."""
    runs = discover_runs(root, exp, scale)
    if not runs:
        raise MissingRuns(f"no completed runs under {experiment_dir(root, scale, exp)}")
    return runs


def image(root: str, scale: str, exp: str, name: str | None = None) -> str:
    path = os.path.join(figures_dir(root, exp, scale), f"{name or exp}.png")
    rel = os.path.relpath(path, os.path.join(root, scale))
    return f"![{exp}]({rel})" if os.path.exists(path) else f"(figure not drawn yet: `make figures` writes {rel})"


def loss_rows(groups: list[Group]) -> list[dict]:
    return [
        {
            "runs": g.label,
            "seeds": len(g.runs),
            "final train loss (last 10%)": g.cell(final_loss),
            "final eval loss": g.cell(lambda r: r.summary.final_eval_loss or np.nan),
            "wall-clock s": g.cell(lambda r: r.summary.total_wall_time_s or np.nan, ".1f"),
            "micro-batches/step": g.cell(lambda r: r.metrics()["micro_batches"].mean(), ".2f"),
        }
        for g in groups
        if g.runs
    ]


# -- sections ---------------------------------------------------------------------------------------
def sec_fig4(root, scale):
    data = fig4_data(root, scale)
    lines = [
        "Paper (§4.1, Llama-2 7B on A100s): communication exceeds computation by more than 4x beyond "
        "24 workers; GPUs idle most of the time.",
        "",
    ]
    lines += table(
        [
            {
                "workers": int(r.workers),
                "compute s/step": f"{r.compute_s:.4f}",
                "communication s/step": f"{r.comm_s:.4f}",
                "comm/compute": f"{r.comm_over_compute:.2f}",
            }
            for r in data.itertuples()
        ]
    )
    ratios = data["comm_over_compute"].to_numpy()
    grows = bool(len(ratios) > 1 and np.all(np.diff(ratios) > 0))
    lines.append(
        f"Shape: the communication/computation ratio {'grows' if grows else 'does not grow'} with the "
        f"number of workers ({' → '.join(f'{x:.2f}' for x in ratios)}): {verdict(grows)} with the trend. "
        "The >4x level needs the paper's model and interconnect; a local machine's workers share its "
        "cores and memory bus, so this measures the trend only."
    )
    return lines


def warmup_note(runs, scale) -> str:
    """' CPU warmups 0/4/30 stand for the paper's 0/40/500.': the DPU warmups the runs' scale lists
    beside the paper's (from the experiment the runs were made from)."""
    if scale == "paper" or not runs:
        return ""

    def listed(at):
        out = []
        for spec in run_specs(experiment_block(runs[0].exp, at)):
            v = spec.get("method.warmup_steps")
            out += [x for x in (v if isinstance(v, list) else [v] if v is not None else []) if x not in out]
        return "/".join(map(str, out))

    here, paper = listed(scale), listed("paper")
    label = {"cpu": "CPU"}.get(scale, scale.capitalize())
    return f" {label} warmups {here} stand for the paper's {paper}." if here and paper else ""


def sec_fig5(root, scale):
    runs = runs_of(root, "fig5", scale)
    budgets = sorted({r.info["steps"] for r in runs})
    base = budgets[0]
    at = [r for r in runs if r.info["steps"] == base]
    ddp, acco = Group("DDP", pick(at, method=BASELINE)), Group("ACCO", pick(at, method=ACCO))
    warmups = sorted({r.info["warmup"] for r in pick(at, method=DPU)})
    dpus = [Group(f"DPU warmup {w}", pick(at, method=DPU, warmup=w)) for w in warmups]
    lines = [
        "Paper (§4.3): delayed updates (DPU) substantially hurt convergence, a 40-step warmup does not "
        "recover the baseline, and ACCO matches the DDP curve. Panel (b) doubles the budget.",
        "",
        f"Setting: {describe_runs(runs)}.{warmup_note(runs, scale)}",
        "",
        f"Budget {base} steps:",
        "",
    ]
    lines += table(loss_rows([ddp, acco, *dpus]))
    if len(budgets) > 1:
        big = [r for r in runs if r.info["steps"] == budgets[-1]]
        d2, a2 = Group("DDP", pick(big, method=BASELINE)), Group("ACCO", pick(big, method=ACCO))
        lines += [f"Budget {budgets[-1]} steps (panel b):", ""] + table(loss_rows([d2, a2]))
    return lines + claim_lines(root, scale, "fig5")


def sec_fig6(root, scale):
    runs = runs_of(root, "fig6", scale)
    g = {m: Group(m.upper(), pick(runs, method=m)) for m in (BASELINE, WP, ACCO)}
    lines = [
        "Paper (§4.3): ACCO matches DDP throughout; WP performs worse, especially early in training.",
        "",
        f"Setting: {describe_runs(runs)}.",
        "",
    ]
    rows = loss_rows(list(g.values()))
    for row, grp in zip(rows, [x for x in g.values() if x.runs]):
        row["loss at 25% of samples"] = grp.cell(lambda r: loss_at_fraction(r, 0.25))
    lines += table(rows)
    return lines + lr_choice_lines(root, scale, "fig6", runs) + claim_lines(root, scale, "fig6")


def lr_choice_lines(root: str, scale: str, exp: str, runs: list[Run]) -> list[str]:
    """The experiment's rule for its learning rate (experiment_info lr_choice), applied again to the
    committed runs it names, against the rate the experiment's runs used."""
    choice = experiment_block(exp, scale).get("lr_choice") or {}
    if not choice or not runs:
        return []
    means = lr_sweep.ddp_means(root, scale)
    if not means:
        return [f"- Learning rate: {choice['rule']} — no {choice['from']} runs here to apply it to."]
    best, used = lr_sweep.ddp_best_lr(root, scale), sorted({peak_lr(r) for r in runs})
    listed = ", ".join(f"{lr:g}: {m:.4f} (n = {n})" for lr, (m, n) in means.items())
    pick = "the rule's pick" if used == [best] else "**not the rule's pick**"
    # the same DDP run composed by both experiments: deterministic rounds give the same losses
    sweep: dict[Any, float] = {
        r.info.get("seed"): final_loss(r)
        for r in discover_runs(root, choice["from"], scale)
        if r.method == BASELINE and peak_lr(r) == best
    }
    own: dict[Any, float] = {r.info.get("seed"): final_loss(r) for r in runs if r.method == BASELINE}
    both = sorted(set(sweep) & set(own))
    same = all(sweep[s] == own[s] for s in both)
    rerun = (
        f" This experiment's DDP runs (seeds {', '.join(map(str, both))}) were run again here: their final "
        f"losses {'equal' if same else '**differ from**'} the sweep's at that rate, seed by seed"
        f"{' (deterministic rounds)' if same else ''}."
        if both
        else ""
    )
    return [
        f"- Learning rate, chosen before the WP runs by the rule written in the experiment's config: "
        f"{choice['rule']}. DDP's mean final loss per rate in {choice['from']}: {listed} → the rule picks "
        f"{best:g}; these runs use {', '.join(f'{v:g}' for v in used)}: {pick}.{rerun}"
    ]


def time_lines(root, scale, exp, runs) -> list[str]:
    t3 = table3(root, scale, save=False)["table"]
    rows = t3[t3["source"] == exp] if not t3.empty else t3
    ddp, acco = Group("DDP", pick(runs, method=BASELINE)), Group("ACCO", pick(runs, method=ACCO))
    out = []
    if not rows.empty:
        r = rows.iloc[0]
        sps = acco.mean(samples_per_s) / ddp.mean(samples_per_s)
        out.append(
            f"- Wall-clock (means over {r.seeds} paired seeds): DDP {r.ddp_s:.1f} s, ACCO {r.acco_s:.1f} s → "
            f"ACCO's reduction {r.reduction_ci} (paper: {r.paper_reduction_pct:.0f}%); to each pair's common "
            f"loss (mean {r.target_loss:.3f}): DDP {r.ddp_to_target_s:.1f} s, ACCO {r.acco_to_target_s:.1f} s → "
            f"{r.reduction_to_target_ci}. Samples/s ACCO/DDP = {sps:.2f}. Network: {network_of(runs)}."
        )
    return out


def span_lines(runs: list[Run], where: str = "") -> list[str]:
    """Where the time goes, from the traces' median spans (Run.span_times): each method's micro-batch
    and sync, and per committed step DDP's 2a·t_mb + t_sync against ACCO's 2·max(a·t_mb, t_sync) —
    with ACCO's own spans, and with DDP's (what ACCO would take if its overlapped syncs cost its
    compute nothing)."""

    def medians(method: str):
        t = [r.span_times() for r in runs if r.method == method]
        mb = [x["t_micro_batch_s"] for x in t if x.get("t_micro_batch_s")]
        sync = [x["t_sync_s"] for x in t if x.get("t_sync_s")]
        accum = [int(r.info.get("accum") or 1) for r in runs if r.method == method]
        return (float(np.median(mb)), float(np.median(sync)), accum[0], len(mb)) if mb and sync else None

    ddp, acco = medians(BASELINE), medians(ACCO)
    if ddp is None or acco is None:
        return []
    (mb_d, sync_d, acc_d, n_d), (mb_a, sync_a, acc_a, n_a) = ddp, acco
    step_d = acc_d * mb_d + sync_d
    step_a = 2 * max(acc_a * mb_a, sync_a)
    ideal = 2 * max(acc_a * mb_d, sync_d)
    return [
        f"- Where the time goes{where} (medians of the traced runs, DDP {n_d}, ACCO {n_a}): a micro-batch takes "
        f"{mb_d * 1e3:.0f} ms in DDP and {mb_a * 1e3:.0f} ms in ACCO ({100 * (mb_a / mb_d - 1):+.0f} %: there "
        f"the overlapped sync's work shares the same cores), a sync {sync_d * 1e3:.0f} ms alone and "
        f"{sync_a * 1e3:.0f} ms overlapped. Per committed step: DDP {acc_d}·t_mb + t_sync = {step_d:.3f} s; "
        f"ACCO 2·max({acc_a}·t_mb, t_sync) = {step_a:.3f} s ({step_a / step_d:.2f}x DDP's), and {ideal:.3f} s "
        f"({ideal / step_d:.2f}x) if overlapping cost its compute nothing (DDP's spans)."
    ]


def overlap_lines(runs: list[Run], where: str = "") -> list[str]:
    """How much of its gradient reduction the overlapped DDP's last backward hid, from its traces
    (Run.span_times: acco/engine/trace.py backward_overlap, medians over steps after the first)."""
    t = [r.span_times() for r in runs if r.method == OVERLAPPED_DDP]
    hidden = [x["backward_hidden_fraction"] for x in t if x.get("backward_hidden_fraction") is not None]
    busy = [x["t_bucket_reductions_s"] for x in t if x.get("t_bucket_reductions_s")]
    if not hidden or not busy:
        return []
    return [
        f"- The overlapped DDP{where}: its last backward hid {100 * float(np.median(hidden)):.0f} % of its "
        f"bucket reduce-scatters ({1e3 * float(np.median(busy)):.0f} ms of them per step; medians of "
        f"{len(hidden)} traced runs); its all-gather after the step hides nothing."
    ]


def sec_pretrain(root, scale, exp):
    runs = runs_of(root, exp, scale)
    ddp, acco = Group("DDP", pick(runs, method=BASELINE)), Group("ACCO", pick(runs, method=ACCO))
    overlapped = Group("DDP (overlapped)", pick(runs, method=OVERLAPPED_DDP))
    claim = (
        "Paper (§4.4, 125M on OpenWebText, 4x8 A100): ACCO's loss vs steps matches DDP's and ACCO is 25% "
        "faster; similar perplexities."
        if exp == "fig7"
        else "Paper (App. A.3, 125M on 8 H100, 6B tokens): ACCO's curve matches DDP's with a shorter wall-clock "
        "(4h41 → 4h25)."
    )
    lines = [claim, "", f"Setting: {describe_runs(runs)}.", ""] + table(loss_rows([ddp, overlapped, acco]))
    lines += claim_lines(root, scale, exp)
    return lines + time_lines(root, scale, exp, runs) + span_lines(runs) + overlap_lines(runs)


def sec_fig8(root, scale):
    runs = runs_of(root, "fig8", scale)
    lines = [
        "Paper (§4.5, 2.7B on Alpaca): ACCO reaches a low validation loss faster than DDP on one node and "
        "on two; the advantage grows across nodes (−87% wall-clock on 2x4).",
        "",
        f"Setting: {describe_runs(runs)}.",
        "",
    ]
    rows = []
    for layout in sorted({r.info["layout"] for r in runs}):
        at = pick(runs, layout=layout)
        by = {m: pick(at, method=m) for m in (BASELINE, DPU, ACCO)}
        if not by[BASELINE] or not by[ACCO]:
            continue
        paired = paired_times(by[BASELINE], by[ACCO], None, target_column("fig8"))
        ttt = {m: np.mean(list(paired["to_target"][m].values())) for m in (BASELINE, ACCO)}
        tot = {m: np.mean(list(paired["total"][m].values())) for m in (BASELINE, ACCO)}
        fin = {m: Group(m, rs).cell(final_eval_loss) if rs else "–" for m, rs in by.items()}
        rows.append(
            {
                "layout": layout,
                "network": network_of(at),
                "seeds DDP/ACCO/DPU": f"{len(by[BASELINE])} / {len(by[ACCO])} / {len(by[DPU])}",
                "final val loss DDP": fin[BASELINE],
                "ACCO": fin[ACCO],
                "DPU": fin[DPU],
                "time to the pair's target DDP / ACCO s (mean)": f"{ttt[BASELINE]:.1f} / {ttt[ACCO]:.1f}",
                "ACCO's reduction, paired": reduction_ci_text(paired["to_target"]),
                "total s DDP / ACCO (mean)": f"{tot[BASELINE]:.1f} / {tot[ACCO]:.1f}",
            }
        )
    lines += table(rows)
    for layout in sorted({r.info["layout"] for r in runs}):
        lines += span_lines(pick(runs, layout=layout), f" on {layout}")
        lines += overlap_lines(pick(runs, layout=layout), f" on {layout}")
    return lines + claim_lines(root, scale, "fig8")


def measured_hetero_ideal(run) -> float:
    """The samples/s a run of heterogeneous workers would reach if no rank ever waited: each rank's own
    micro-batch rate in the run (acco/harness/bench/measure.py rank_rates: while sharing the cores as it did),
    summed, times the micro-batch size; nan without a trace."""
    path = os.path.join(run.path, "trace.json")
    rates = rank_rates(path) if os.path.exists(path) else []
    return sum(rates) * float(run.config["data"]["micro_batch_size"]) if rates else float("nan")


def sec_fig9(root, scale):
    runs = runs_of(root, "fig9", scale)
    ddp, acco = Group("DDP", pick(runs, method=BASELINE)), Group("ACCO", pick(runs, method=ACCO))
    lines = [
        "Paper (§4.6): 4 workers, one 4x slower; ACCO lets the fast workers keep accumulating and takes "
        "substantially less wall-clock than DDP, whose fast workers idle 3/4 of the time.",
        "",
        f"Setting: {describe_runs(runs)}; heterogeneity {sorted({r.info['hetero'] for r in runs})}.",
        "",
    ]
    overlapped = Group("DDP (overlapped)", pick(runs, method=OVERLAPPED_DDP))
    lines += table(loss_rows([ddp, overlapped, acco]))
    lines += overlap_lines(runs)
    sps = acco.mean(samples_per_s) / ddp.mean(samples_per_s)
    independent = 3.25  # (3 fast workers at 1 + one at 1/4) / (DDP: all at the slow worker's pace, 4 x 1/4)
    lines.append(
        f"- Samples/s ACCO/DDP = {sps:.2f} (for 3 fast + 1 at 1/4 speed on independent devices: {independent}; "
        "on 2 cores the workers are not independent devices)."
    )
    measured = acco.mean(measured_hetero_ideal)
    if measured == measured:  # not nan: the runs have traces
        lines.append(
            f"- ACCO's samples/s = {acco.mean(samples_per_s) / measured:.2f} x the sum of its own workers' "
            f"micro-batch rates in the same run ({measured:.1f} samples/s). This is not an independent ideal: "
            "it is read from ACCO's own run, so it measures how little ACCO's workers wait, not what an "
            "undisturbed worker would do (on 2 shared cores ACCO's contention slows the very rates it is held "
            "against); the virtual clock (issue 31) is where an independent one belongs."
        )

    def run_end(g: Group) -> str:
        seconds, samples = g.mean(lambda r: r.summary.total_wall_time_s), g.mean(lambda r: r.summary.samples)
        steps = g.mean(lambda r: r.summary.steps_completed)
        return f"{g.label} {seconds:.1f} s for {samples:.0f} samples in {steps:.0f} steps"

    lines.append(
        f"- Whole runs (means): {run_end(ddp)}, {run_end(acco)}; ACCO's steps carry "
        f"{acco.mean(lambda r: r.metrics()['micro_batches'].mean()):.1f} micro-batches on average vs "
        f"DDP's {ddp.mean(lambda r: r.metrics()['micro_batches'].mean()):.1f} (bigger steps, so compare "
        "loss vs samples and vs time in the figure, not per step)."
    )
    return lines + claim_lines(root, scale, "fig9")


def sec_fig10(root, scale):
    runs = runs_of(root, "fig10", scale)
    lines = [
        "Paper (App. A.1, Fig. 10): DPU with 2 against 1 accumulation steps per GPU (1: an optimizer step at "
        'each communication, half the batch, twice the steps per sample): "faster early convergence with two '
        'accumulation steps is accompanied by worse final training loss". The claims read that sentence '
        "literally: the two-accumulation arm is A, expected faster early and worse at the end; the third "
        "claim tests the crossing itself.",
        "",
        f"Setting: {describe_runs(runs)}.",
        "",
    ]
    if len({budget_of(r) for r in runs} - {None}) < 2:  # no ladder: one budget, as the paper scale runs
        g1, g2 = Group("DPU accum 1", pick(runs, accum=1)), Group("DPU accum 2", pick(runs, accum=2))
        rows = loss_rows([g1, g2])
        for row, grp in zip(rows, [g for g in (g1, g2) if g.runs]):
            row["loss at 25% of samples"] = grp.cell(lambda r: loss_at_fraction(r, 0.25))
        return lines + table(rows) + claim_lines(root, scale, "fig10")
    data = rungs(root, scale)

    def gap_cell(o) -> str:
        return "–" if o.look is None else f"{o.look.gap.describe()}, {o.look.sign.value}"

    lines += [
        "The budget ladder: each rung is a cosine over its own budget in samples, the warmup the same samples "
        "for both arms; *epochs*: the rung's samples over the training set's blocks (below 1: no sample is "
        "read twice). Gaps are accum 2 against accum 1, paired by seed, 95 % intervals at the fixed n.",
        "",
    ]
    lines += table(
        [
            {
                "budget (samples)": r["samples"],
                "epochs read": "unknown" if r["epochs"] != r["epochs"] else f"{r['epochs']:.2f}",
                "final loss accum 1 / accum 2": f"{r['final_1']:.3f} / {r['final_2']:.3f}",
                "gap at 25 % of the samples": gap_cell(r["early"]),
                "gap at the end": gap_cell(r["final"]),
            }
            for r in data
        ]
    )
    ends = [
        (r["samples"], r["final"].look.gap.mean_pct)
        for r in data
        if r["final"].look is not None and r["final"].look.gap.n
    ]
    if len(ends) > 1:
        (x0, g0), (x1, g1) = ends[0], ends[-1]
        lines.append(
            f"- The final gap {'rises' if g1 > g0 else 'falls'} with the budget, {g0:+.1f} % → {g1:+.1f} % "
            f"from {x0} to {x1} samples (per rung above)."
        )
    return lines + claim_lines(root, scale, "fig10")


def sec_table1(root, scale):
    t = table1(root, scale, save=False)
    f = t["formulas"]
    match = int((f["gb"].round(0) == f["paper_gb"]).sum()) if "paper_gb" in f else 0
    lines = [f"Formulas (K=12, N=64, Ψ=7.5B) vs the paper's GB: {match}/{len(f)} equal after rounding.", ""]
    lines += table(
        [
            {"method": r.method, "formula": r.formula, "GB": f"{r.gb:.2f}", "paper GB": r.paper_gb}
            for r in f.itertuples()
        ]
    )
    off = f[f["gb"].round(0) != f["paper_gb"]]
    for r in off.itertuples():
        lines.append(
            f"- {r.method}: the formula gives {r.gb:.2f} GB, the paper prints {r.paper_gb} "
            "(reported as computed, not forced)."
        )
    m = t.get("measured")
    if m is not None and not m.empty:
        lines += ["", "Measured per-rank bytes in this folder's runs (see tables/table1.md for every run)."]
    return lines


def sec_table2(root, scale):
    df = table2(root, scale, save=False)["table"]
    lines = [
        "Paper: ACCO 47.1/24.2 vs DDP 47.5/24.3 (1x8); 45.5/22.5 vs 44.1/21.7 (4x8) — LAMBADA / OWT "
        "perplexity: similar.",
        "",
    ]
    cols = [
        c
        for c in ("source", "method", "lambada_ppl", "heldout_ppl", "paper_lambada_ppl", "paper_owt_ppl")
        if c in df.columns
    ]
    lines += table(
        [
            {c: (f"{v:.2f}" if isinstance(v, float) else v) for c, v in zip(cols, row)}
            for row in df[cols].itertuples(index=False)
        ]
    )
    return lines + [
        "Verdicts: the held-out perplexity claims of fig7 and fig11 (the claims table), by the rule at the top; "
        "the LAMBADA numbers here use generated passages in LAMBADA's format at the CPU scale."
        if scale == "cpu"
        else "Verdicts: the held-out perplexity claims of fig7 and fig11 (the claims table), by the rule at the top."
    ]


def sec_table3(root, scale):
    df = table3(root, scale, save=False)["table"]
    lines = [
        "Paper: ACCO cuts wall-clock by 6% (125M, 1x8 H100), 25% (125M, 4x8 A100), 42% (2.7B FT 1x8), "
        "87% (2.7B FT 2x4).",
        "",
    ]
    lines += table(
        [
            {
                "row": r.name,
                "source": r.source,
                "DDP s": f"{r.ddp_s:.1f}",
                "ACCO s": f"{r.acco_s:.1f}",
                "seeds": r.seeds,
                "reduction, paired": r.reduction_ci,
                "to target, paired": r.reduction_to_target_ci,
                "paper": f"{r.paper_reduction_pct:.0f}%",
            }
            for r in df.itertuples()
        ]
    )
    return lines + [
        "Reductions are ACCO's per seed, (t_DDP − t_ACCO) / t_DDP, mean [95 % interval] over the seeds both "
        "methods ran; *to target*: to the worse of the pair's two final losses, on the loss the figure's "
        f"wall-clock claim reads (the training loss's {SMOOTH_STEPS}-step mean, or the validation loss). "
        "Their verdicts are the wall-clock claims of fig7, fig8 and fig11 in the claims table. Pairing by seed "
        "pairs the initialisation and the data order, not the timing noise: the two runs of a seed did not run "
        "side by side, so a time's interval also carries the machine's load at each run's own moment (the "
        "claims' margin for a time is that noise, measured as B's seconds per sample across its seeds). "
        "Equal-time readings of loss belong to the virtual clock (issue 31), not to these measured times."
    ]


def sec_lr_sweep(root, scale):
    data = lr_sweep.rows(root, scale)
    runs = discover_runs(root, "lr_sweep", scale)
    lines = [
        "Question: dynamics (loss against samples at equal work). The paper reports ACCO equal to DDP at its "
        "own rates (5e-4 TinyStories, 6e-4 OpenWebText); ACCO's committed step mixes gradients taken at θ_t "
        "and at the estimate θ̃_{t+1}, one step ahead, so its gap to DDP may grow with the step size. "
        "Deterministic ACCO with 1 micro-batch per round against DDP with 2, paired seeds, "
        f"{lr_sweep.DESIGN.describe()} per rate; the margin is the final loss's (one sd of DDP's seed-to-seed spread "
        "at that rate). Its DDP runs also choose fig6's rate (the rate DDP does best at).",
        "",
        f"Setting: {describe_runs(runs)}.",
        "",
        "| peak lr | DDP final loss (mean) | DDP seed spread | ACCO final loss (mean) | ACCO vs DDP, paired "
        "| sign | margin m | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in data:
        look = r["look"]
        lines.append(
            f"| {r['lr']:g} | {r['ddp_final']:.3f} | {r['ddp_spread_pct']:.1f} % | {r['acco_final']:.3f} | "
            f"{r['gap'].describe()} | {look.sign.value} | ±{r['margin_pct']:.2f} % | **{r['verdict'].value}** |"
        )
    matches = [r["lr"] for r in data if r["verdict"] is Verdict.MATCHES]
    worse = [r["lr"] for r in data if r["verdict"] is Verdict.WORSE]
    lines += [
        "",
        f"- ACCO matches DDP at: {', '.join(f'{lr:g}' for lr in matches) or 'no rate'}; worse at: "
        f"{', '.join(f'{lr:g}' for lr in worse) or 'no rate'}; the other rates are undecided at the fixed n "
        "(inconclusive: no seeds are added).",
        f"- DDP does best at {lr_sweep.ddp_best_lr(root, scale):g} (lowest mean final loss among its swept rates).",
    ]
    verdict = {r["lr"]: r["verdict"].value for r in data}
    for exp in ("fig5", "fig6", "fig10"):  # the rate the CPU dynamics figures chose, against the sweep
        fig_runs = discover_runs(root, exp, scale)
        if not fig_runs:
            continue
        lr = peak_lr(fig_runs[0])
        lines.append(
            f"- {exp} runs at peak lr {lr:g} with {(fig_runs[0].config.get('model') or {}).get('name')}; the sweep's "
            f"verdict at that rate: {verdict.get(lr, 'not swept')}."
        )
    return lines


def sec_outer_sweep(root, scale):
    return outer_sweep.section(root, scale)


def sec_beyond_diloco(root, scale):
    return beyond_diloco.section(root, scale)


SECTIONS = [
    ("fig4", "Fig. 4 — communication vs computation as workers grow", sec_fig4),
    ("fig5", "Fig. 5 — TinyStories: DDP vs DPU (warmups) vs ACCO", sec_fig5),
    ("fig6", "Fig. 6 — TinyStories: ACCO vs WP vs DDP", sec_fig6),
    ("fig7", "Fig. 7 — GPT-Neo pretraining, loss vs steps and vs time", lambda r, s: sec_pretrain(r, s, "fig7")),
    ("fig8", "Fig. 8 — instruction fine-tuning, one panel per node layout", sec_fig8),
    ("fig9", "Fig. 9 — heterogeneous workers (one 4x slower)", sec_fig9),
    ("fig10", "Fig. 10 — DPU with 1 vs 2 accumulation steps", sec_fig10),
    ("fig11", "Fig. 11 — GPT-Neo pretraining on one node", lambda r, s: sec_pretrain(r, s, "fig11")),
    ("table1", "Table 1 — memory per replica", sec_table1),
    ("table2", "Table 2 — perplexity", sec_table2),
    ("table3", "Table 3 — wall-clock, DDP (ZeRO-1) vs ACCO", sec_table3),
    ("lr_sweep", "Beyond the paper — ACCO's gap to DDP against the learning rate", sec_lr_sweep),
    ("outer_sweep", "Beyond the paper — DiLoCo's outer optimizer per H, chosen by a rule", sec_outer_sweep),
    ("beyond_diloco", "Beyond the paper — ACCO vs DiLoCo and Streaming DiLoCo across links", sec_beyond_diloco),
]


def claim_outcomes(root: str, scale: str) -> list[tuple[str, Any, Any]]:
    """(experiment, Claim, ClaimOutcome) of every claim the experiments list (analysis/claims.py), tested
    on this folder, in the report's order: the claims table and the picture above it read these."""
    out = []
    for exp, *_ in SECTIONS:
        claims = claims_of(experiment_block(exp, scale), scale)
        runs = runs_for(claims, root, exp, scale)
        out += [(exp, claim, evaluate(claim, runs[claim_clock(claim)])) for claim in claims]
    return out


def claims_section(root: str, scale: str, outcomes: list | None = None) -> list[str]:
    """The first table: every claim the experiments list (analysis/claims.py), tested on this folder."""
    rows = []
    for exp, claim, o in claim_outcomes(root, scale) if outcomes is None else outcomes:
        seen = "not run" if o.verdict is None else o.verdict.value
        look = o.look
        decided = look is not None and look.gap.n > 0
        margin = look.margin_pct if look is not None else float("nan")
        rows.append(
            {
                "figure": exp,
                "question": claim.question,
                "claim (A vs B)": claim.name,
                "paper": claim.paper,
                "number": METRICS[claim.metric].label
                + (f" − the same gap on the {METRICS[claim.versus].label}" if claim.versus else ""),
                "paper's claim is one of": claim.tests,
                "A / B (means)": "–" if o.verdict is None else f"{o.mean_a:.4g} / {o.mean_b:.4g}",
                "look": "–" if look is None else look.describe_look(),
                "A vs B, paired (interval at the look)": "–"
                if not decided
                else f"{cast(Look, look).gap.describe()} at {cast(Look, look).gap.confidence:.1%}",
                "sign": "–" if not decided else cast(Look, look).sign.value,
                "margin m": "–" if margin != margin else f"±{margin:.2f} %",
                "size": "–" if not decided or margin != margin else size_text(cast(Look, look)),
                "expected": claim.expect.value,
                "verdict": f"**{seen}**",
                "reproduced": "no verdict"
                if o.verdict is Verdict.UNVALIDATED
                else {True: "yes", False: "**no**", None: "not yet"}[o.reproduced],
            }
        )
    if not rows:
        return []
    return [
        "## The claims",
        "",
        "Each claim compares two groups of an experiment's runs (A against B) on one number, paired by seed; "
        "the claims are listed in `conf/experiment_info/<id>.yaml` and tested by `analysis/claims.py` with the "
        "rule above. *Look*: the planned look the verdict was taken at (a claim with one planned n has one "
        "look). *Sign*: whether the interval excludes 0. *Margin m*, per metric, from B's runs at the look's "
        "seeds: one standard deviation of B's own seed-to-seed spread of the number, in % of its mean (a gap "
        "inside ±m is smaller than what changing the seed does); for a time or a speed, of B's seconds per "
        "sample (its seeds do the same work, so that spread is the clock's timing noise, not a loss curve's "
        "crossing point); a difference of two gaps has none (sign only). "
        "*Paper's claim is one of*: whether the paper's words are about the gap's size or its sign; the "
        "verdict reads that one. Losses are read at equal samples (each seed's pair at the smaller of its "
        "two sample totals). *Reproduced*: the verdict is the one the paper implies; *not yet*: the next "
        "planned look needs more seeds (`experiments/reproduce.py` adds them).",
        "",
        *table(rows),
    ]


OVERLAP_SUFFIX = " (vs the overlapped DDP)"  # conf/experiment_info/<id>.yaml: a claim's twin against it


def advantage(vs_paper, vs_best) -> str:
    """What happens to ACCO's win when its baseline hides what it can, by a rule fixed before the
    runs: *holds* (better against both, by at least as much), *shrinks* (better against both, by
    less), *vanishes* (better against the paper's DDP, not against the overlapped one), *reverses*
    (worse against the overlapped one), *no win to lose* (not better against the paper's DDP either);
    *not run* where a side has no runs, *not decided* where a verdict still waits for seeds."""
    if vs_paper.verdict is None or vs_best.verdict is None:
        return "not run"
    if Verdict.MORE_SEEDS in (vs_paper.verdict, vs_best.verdict):
        return "not decided"
    paper_win = vs_paper.verdict is Verdict.BETTER
    if vs_best.verdict is Verdict.WORSE:
        return "reverses" if paper_win else "no win to lose (worse against both)"
    if not paper_win:
        return "no win to lose"
    if vs_best.verdict is not Verdict.BETTER:
        return "vanishes"
    # better against both: by how much (a time's gap is negative where A is faster)
    return "holds" if abs(vs_best.gap.mean_pct) >= abs(vs_paper.gap.mean_pct) else "shrinks"


def baseline_section(root: str, scale: str) -> list[str]:
    """ACCO against the DDP at its best beside the paper's: each wall-clock claim that has a twin
    against the overlapped DDP (conf/experiment_info/<id>.yaml), the two verdicts side by side, and
    where ACCO's advantage holds, shrinks or vanishes (`advantage`)."""
    rows: list[dict] = []
    kinds: dict[str, list[str]] = {}
    for exp, *_ in SECTIONS:
        claims = claims_of(experiment_block(exp, scale), scale)
        by_name = {c.name: c for c in claims}
        runs = runs_for(claims, root, exp, scale)
        for c in claims:
            if not c.name.endswith(OVERLAP_SUFFIX) or c.name[: -len(OVERLAP_SUFFIX)] not in by_name:
                continue
            twin = by_name[c.name[: -len(OVERLAP_SUFFIX)]]
            vs_paper, vs_best = evaluate(twin, runs[claim_clock(twin)]), evaluate(c, runs[claim_clock(c)])
            kind = advantage(vs_paper, vs_best)
            kinds.setdefault(kind, []).append(f"{exp}: {twin.name}")

            def cell(o) -> str:
                if o.verdict is None or o.look is None or not o.look.gap.n:
                    return "not run"
                return f"{o.look.gap.describe()}, **{o.verdict.value}**"

            rows.append(
                {
                    "figure": exp,
                    "clock": claim_clock(c),
                    "claim (ACCO vs DDP)": twin.name,
                    "vs the paper's DDP (blocking)": cell(vs_paper),
                    "vs the overlapped DDP": cell(vs_best),
                    "ACCO's advantage": f"**{kind}**",
                }
            )
    if not rows:
        return []
    out = [
        "## Against the DDP at its best",
        "",
        "The paper's baseline (and every DDP above unless named) reduces its gradients after the whole "
        "backward pass. The DDP researchers run hides part of it: PyTorch's DDP all-reduces each bucket "
        "once its gradients are final in the last micro-batch's backward, ZeRO's `overlap_comm` and FSDP "
        "reduce-scatter likewise; what follows the reduction (the optimizer step, ZeRO's all-gather or "
        "broadcast) cannot be hidden. The *overlapped DDP* (`method.overlap_backward=true`, "
        "acco/engine/backward_overlap.py) is that baseline on the same machinery: every wall-clock claim "
        "is read against it too, on the same seeds, by the same rule (the claims table above lists both). "
        "*ACCO's advantage*, by a rule fixed before the runs: *holds* (better against both, by at least as "
        "much), *shrinks* (better against both, by less), *vanishes* (better only against the paper's), "
        "*reverses* (worse against the overlapped DDP), *no win to lose* (not better against the paper's "
        "DDP either), *not run* / *not decided* (runs or seeds missing).",
        "",
        *table(rows),
    ]
    for kind, label in (
        ("holds", "ACCO still wins, by at least as much,"),
        ("shrinks", "ACCO still wins, by less,"),
        ("vanishes", "ACCO's advantage vanishes"),
        ("reverses", "ACCO's advantage reverses"),
    ):
        if kinds.get(kind):
            out.append(f"- {label} in: " + "; ".join(kinds[kind]) + ".")
    missing = sum(len(v) for k, v in kinds.items() if k in ("not run", "not decided"))
    if missing:
        out.append(f"- {missing} of {len(rows)} comparisons are not run or not decided yet.")
    return out + [""]


# the wall-clock settings of Table 3: experiment, the layout among its runs (min: one node, max: two)
COMM_SETTINGS = [
    ("fig11", None, "125M pretraining, 1x8 H100"),
    ("fig7", None, "125M pretraining, 4x8 A100"),
    ("fig8", "min", "2.7B fine-tuning, 1x8"),
    ("fig8", "max", "2.7B fine-tuning, 2x4"),
]


def measured_comm_ratio(ddp_run: Run, acco_accum: int) -> float:
    """Communication over ACCO's compute per round, measured where the two do not overlap: a traced
    run of the sequential flat DDP (the same bytes as ACCO's sync), its median reduce-scatter +
    all-gather over (its median micro-batch × ACCO's micro-batches per round); nan without one."""
    if (ddp_run.config.get("method") or {}).get("impl") != "flat":
        return float("nan")
    t = ddp_run.span_times()
    comm: list[Any] = [t.get("t_reduce_scatter_s"), t.get("t_all_gather_s")]
    if None in comm or not t.get("t_micro_batch_s"):
        return float("nan")
    return float(sum(comm)) / (float(t["t_micro_batch_s"]) * acco_accum)


def comm_section(root: str, scale: str) -> list[str]:
    """Is there communication to hide? The paper's ratio (acco/analytic/costmodel.py, its model and
    hardware) beside the one measured in this folder's DDP runs, per wall-clock setting."""
    paper = {r["row"]: r for r in table3_rows()}
    rows = []
    for exp, layout, name in COMM_SETTINGS:
        runs = discover_runs(root, exp, scale)
        if layout is not None:
            want = resolve({"layout": layout}, [r.info for r in runs])
            runs = [r for r in runs if selected(r.info, want)]
        acco = [r for r in runs if r.method == ACCO]
        accum = int(acco[0].info.get("accum") or 1) if acco else 1
        ratios = [x for x in (measured_comm_ratio(r, accum) for r in runs if r.method == BASELINE) if x == x]
        p = paper[name]
        rows.append(
            {
                "setting (paper)": name,
                "paper comm/compute (cost model)": f"{p['sync_s'] / p['compute_per_round_s']:.2f}",
                "paper reduction: predicted / reported": f"{p['predicted_reduction_pct']:.0f} % / "
                f"{p['paper_reduction_pct']:.0f} %",
                "CPU runs": f"{exp} {runs[0].info['layout']}, ACCO {accum} micro-batch(es) per round"
                if runs
                else f"{exp}: no runs",
                "CPU link": network_of(runs) if runs else "–",
                "CPU comm/compute (measured)": f"{np.median(ratios):.2f} (median of {len(ratios)} DDP runs)"
                if ratios
                else "no trace of a flat DDP run",
            }
        )
    return [
        "## Communication to hide",
        "",
        "A wall-clock claim can only be tested where there is communication to hide, and its size depends "
        "on how much: per round, the sync time over ACCO's compute. The paper's ratio comes from the cost "
        "model (its model, workers and hardware; predicted reduction 1 − 2 max(c, m) / (2c + m)); ours is "
        "measured where communication and compute do not overlap, in the traces of the sequential flat "
        "DDP runs (median reduce-scatter + all-gather over the median micro-batch × ACCO's micro-batches "
        "per round). Each CPU link was chosen for the paper's ratio; the table shows how close the measured "
        "one came. At the smallest ratios the testbed's fixed cost per sync (gloo's latency, ~10 ms) is "
        "the floor: a faster link no longer lowers it.",
        "",
        *table(rows),
    ]


def forest_lines(root: str, scale: str, rows: list, written: list[str] | None = None) -> list[str]:
    """The picture under the first table (analysis/forest.py): one row per paper claim, written beside
    the report in figures/, its title the abstract's measured counts (headline_counts). The files it
    wrote are added to `written`."""
    plotted = forest_rows(rows)
    m = headline_counts(rows, scale)["measured"]
    caption = (
        f"Measured here ({scale}): {len(m['reproduced'])} of {m['spoke']} paper claims reproduced, "
        f"{len(m['against'])} decided against, {len(m['inconclusive'])} inconclusive "
        f"(the {len(plotted)} with a paired test shown)"
    )
    paths = write_forest(plotted, os.path.join(root, scale, "figures"), caption)
    if written is not None:
        written += paths
    if not paths:
        return []
    return [
        image_line(os.path.join(root, scale), paths),
        "",
        *wrap(
            "*The table at a glance:* per paper claim, the paired gap of its first measured test (else its "
            "first modelled one) with the interval at its look, over its margin ±m (grey), coloured by the "
            "verdict of that test (Holm's included); filled where the table's cell says reproduced, hollow where not "
            "(a claim with two tests, fig9's, is reproduced only if both are)."
        ),
        "",
    ]


def wrap(text: str, width: int = WIDTH) -> list[str]:
    """Prose wrapped for a reader of the raw file (no line to scroll sideways)."""
    return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False) or [""]


def build_report(root: str, scale: str = "cpu") -> str:
    """Every Markdown document of the report in reading order (REPORT.md, claims.md, details.md), one
    text: what the in-process tests read. `build_documents` gives them apart."""
    docs = build_documents(root, scale)
    return "\n".join(docs[name] for name in DOCUMENTS if name.endswith(".md"))


def build_documents(root: str, scale: str = "cpu", figures: list[str] | None = None) -> dict[str, str]:
    """REPORT.md (the first screen), claims.md and claims.csv (every claim), details.md (every
    section): every document reads the one loaded set of runs (analysis/load.py loaded_once).
    REPORT.md's picture is written on the way (figures/claims.{png,pdf}): its paths are added to `figures`."""
    with loaded_once():
        return _build_documents(root, scale, figures)


DOCUMENTS = ("REPORT.md", "claims.md", "claims.csv", "details.md", "headline.json")
SECTION_IDS = {"fig4": "fig4", "table1": "table1"}  # details.md's anchors: the experiment ids


def _build_documents(root: str, scale: str, figures: list[str] | None) -> dict[str, str]:
    outcomes = claim_outcomes(root, scale)
    rows = build_rows(outcomes, root, scale)
    return {
        "REPORT.md": "\n".join(front_page(root, scale, rows, figures)) + "\n",
        "claims.md": "\n".join(claims_document(root, scale, outcomes)) + "\n",
        "claims.csv": claims_csv(outcomes),
        "details.md": "\n".join(details_document(root, scale)) + "\n",
        "headline.json": json.dumps(headline_counts(rows, scale), indent=1) + "\n",
    }


def front_page(root: str, scale: str, rows: list, figures: list[str] | None = None) -> list[str]:
    """REPORT.md: the abstract, one row per paper claim with a column per kind of evidence, the
    picture, how to read it, provenance and the commands that re-run each part."""
    out = [
        f"# Reproduction report — {scale} scale",
        "",
        f"Generated by `python analysis/report.py {root} --scale {scale}` (also run by `make figures`) at commit "
        f"{code_commit()}, from the run folders alone.",
        "",
        *abstract(rows, scale),
        "",
        "## The paper's claims",
        "",
        *headline_table(rows),
        "",
        *forest_lines(root, scale, rows, figures),
        *reading_lines(root, scale, rows),
        *provenance_lines(root, scale),
        *rerun_lines(root, scale),
    ]
    return out


def headline_counts(rows: list, scale: str) -> dict:
    """What the abstract counts, as data (headline.json; README's results block, analysis/readme_block.py):
    per kind of evidence how many claims it speaks to and its verdicts' counts, and the measured
    claims' ids by outcome."""
    no = [r for r in rows if r.cells["measured"].status is False]
    kinds = {}
    for kind in KINDS:
        c = counts(rows, kind)
        kinds[kind] = {"title": KIND_TITLES[kind], "spoke": len(rows) - c["none"], **c}
    return {
        "scale": scale,
        "claims": len(rows),
        "kinds": kinds,
        "measured": {
            "spoke": kinds["measured"]["spoke"],
            "reproduced": [r.id for r in rows if r.cells["measured"].status is True],
            "against": [r.id for r in no if decided_against(r.cells["measured"])],
            "inconclusive": [r.id for r in no if not decided_against(r.cells["measured"])],
        },
    }


def abstract(rows: list, scale: str) -> list[str]:
    head = headline_counts(rows, scale)
    parts = []
    for c in head["kinds"].values():
        if not c["spoke"]:
            continue
        bits = [f"{c['reproduced']} reproduced", f"{c['not reproduced']} not reproduced"]
        if c["undecided"]:
            bits.append(f"{c['undecided']} undecided")
        if c["outside"]:
            bits.append(f"{c['outside']} outside the model's validated range")
        if c["words"]:
            bits.append(f"{c['words']} without a verdict")
        parts.append(f"*{c['title']}* speaks to {c['spoke']}: " + ", ".join(bits))
    yes, against, open_ = (head["measured"][k] for k in ("reproduced", "against", "inconclusive"))
    n = head["claims"]
    setting = (
        "a ~0.5M-parameter GPT-Neo on generated stories, 2–4 worker processes on a 2-core machine: absolute "
        "losses and times are not the paper's, the comparisons between methods are what is tested"
        if scale == "cpu"
        else "the scale's own runs"
    )
    text = (
        f"This report tests the {n} claims of ACCO (arXiv 2406.02613) listed below at the {scale} scale "
        f"({setting}). "
        + "; ".join(parts)
        + ". Measured and reproduced: "
        + (", ".join(yes) or "none")
        + ". Measured and decided against the paper: "
        + (", ".join(against) or "none")
        + ". Measured, not reproduced and not decided against (inconclusive, or no test of its own): "
        + (", ".join(open_) or "none")
        + ". Each wall-clock claim is read "
        "against the fastest DDP measured for it; modelled verdicts carry the model's validated error; the "
        "whole table's verdicts hold family-wise (Holm)."
    )
    return wrap(text)


def headline_table(rows: list) -> list[str]:
    links = {
        "measured": None,
        "modelled": "details.md#virtual-clock",
        "simulated": "details.md#simulated",
        "gpu": "../gpu/README.md",
    }
    out = [
        "| figure | the paper's claim | " + " | ".join(KIND_TITLES[k] for k in KINDS) + " |",
        "|---|---|" + "---|" * len(KINDS),
    ]
    for r in rows:
        cells = []
        for kind in KINDS:
            cell = r.cells[kind]
            exp = cell.tests[0].exp if cell.tests else r.id.split("-")[0]
            link = links[kind] or f"details.md#{exp}"
            cells.append(cell_text(cell, link))
        out.append(f"| {r.figure} | {r.claim} | " + " | ".join(cells) + " |")
    return out


def reading_lines(root: str, scale: str, rows: list) -> list[str]:
    m = family_size(rows)
    out = ["## How to read it", ""]
    out += wrap(
        "Each cell links to its evidence. *—*: that kind of evidence cannot speak to the claim (a loss claim "
        "has no modelled or simulated time; otherwise the cell says why). *Undecided*: a planned look still "
        "needs seeds. Intervals are of A against B in %, paired by seed, at the look the verdict was taken at."
    )
    out.append("")
    out += wrap(
        "*Measured* cells read the experiment claims (details in [claims.md](claims.md)) by the rule stated "
        f"there: runs paired by seed, Student's t intervals at planned looks, α = {ALPHA:g} per claim. A "
        "wall-clock cell names the DDP it is read against: the fastest of the paper's (blocking) DDP, the "
        "overlapped DDP and PyTorch's DDP on the claim's own number (the choice can only make ACCO's case "
        "harder), with the verdict against the paper's DDP beside it. **Multiplicity**: the table's "
        f"{m} measured and modelled tests are one family; Holm's procedure keeps the chance of any false "
        f"verdict among them at most α = {ALPHA:g}, so a verdict that holds on its own but not in the family "
        "reads *inconclusive (Holm)*."
    )
    out.append("")
    out += wrap(
        "*Modelled* cells read the same runs' losses on the virtual clock's time: each interval is widened on "
        "both sides by the clock's validated error for that pair of methods (the error of a ratio of two "
        "modelled step times against the measured ones, details.md § virtual clock), and a claim whose runs lie "
        "outside what was validated (another number of ranks, heterogeneous workers, a comm/compute ratio "
        "outside the validated ones) gets no verdict. *Simulated* cells give the scale simulator's ACCO/DDP "
        "time at the paper's setting against 1 ± its error on such a ratio (a prediction, not a test over "
        "seeds). *GPU*: no paper claim has been tested on a GPU yet (results/gpu/)."
    )
    out.append("")
    out += lambada_lines(root, scale)
    out += bench_lines(root, scale, rows)
    return out


def lambada_lines(root: str, scale: str) -> list[str]:
    if scale != "cpu":
        return []
    t2 = table2(root, scale, save=False)["table"]
    if t2.empty or "lambada_acc" not in t2:
        return []
    acc = t2["lambada_acc"].astype(float)
    return wrap(
        f"*LAMBADA at the CPU scale* ({acc.min():.2f}–{acc.max():.2f} accuracy here, the paper's 45–47 %): the "
        "tiny model is trained for minutes on generated stories and evaluated on generated passages in "
        "LAMBADA's schema, so it cannot predict a last word; the number only shows the evaluation path runs. "
        "Table 2's claim is read on held-out perplexity."
    ) + [""]


def bench_lines(root: str, scale: str, rows: list) -> list[str]:
    """`make bench` beside fig7: the same pairing or why not, with a number from each."""
    path = os.path.join(root, "bench", "best_ddp.csv")
    if scale != "cpu" or not os.path.exists(path):
        return []
    best = pd.read_csv(path)
    at = best[(best["group"] == "grid") & (best["ratio_target"] == 1.0)]
    if at.empty:
        return []
    fig7 = discover_runs(root, "fig7", scale)
    acco = [samples_per_s(r) for r in pick(fig7, method=ACCO)]
    ddps = {
        label: [samples_per_s(r) for r in rs]
        for label, rs in (
            ("the paper's DDP", pick(fig7, method=BASELINE, impl="flat")),
            ("the overlapped DDP", pick(fig7, method=OVERLAPPED_DDP)),
            ("PyTorch DDP", pick(fig7, method=BASELINE, impl="torch")),
        )
        if rs
    }
    if not acco or not ddps:
        return []
    label, speeds = max(ddps.items(), key=lambda kv: float(np.mean(kv[1])))
    ratio = float(np.mean(acco)) / float(np.mean(speeds))
    lo, hi = at["acco_over_best_ddp"].min(), at["acco_over_best_ddp"].max()
    return wrap(
        f"*`make bench` against fig7.* The bench (results/bench/best_ddp.csv) finds ACCO at {lo:.2f}–{hi:.2f}x "
        f"the fastest DDP's samples/s at comm/compute ≈ 1; fig7's runs give {ratio:.2f}x ({label}, the fastest "
        "here, mean samples/s). Not the same pairing: the bench gives ACCO and DDP the same micro-batches per "
        "round, so ACCO commits twice DDP's samples per step and hides its sync under a whole DDP step's "
        "compute; fig7 pairs them at equal samples per step (the paper's pairing: ACCO's round holds half "
        "DDP's micro-batches), so ACCO's sync must hide under half that compute, and on 2 shared cores the "
        "overlapped sync also slows the compute it hides under."
    ) + [""]


def provenance_lines(root: str, scale: str) -> list[str]:
    out = ["## Provenance", ""]
    out += wrap(
        "The runs were made on this project's CPU machines (2 cores, shared); each run made since issue 49 "
        "records its host (CPUs, load averages at start and end, torch, UTC times) in summary.json. Per "
        "experiment:"
    )
    out.append("")
    for exp, *_ in SECTIONS:
        runs = discover_runs(root, exp, scale)
        if runs:
            out.append(f"- {host_line(exp, runs)}")
    out.append("")
    # the commit that adds the runs is not known while the report is written beside them: git says it
    out += wrap(
        f"The commit that added an experiment's runs: `git log -- results/{scale}/<id>`; the code that made "
        "each run: its config.yaml and summary.json."
    )
    out.append("")
    return out


def rerun_lines(root: str, scale: str) -> list[str]:
    ids = [exp for exp, *_ in SECTIONS]
    return [
        "## Re-running",
        "",
        f"- One experiment's runs, what is missing only: `python experiments/reproduce.py <id> --scale {scale}` "
        "(`--plan` first shows what it would run).",
        f"- The ids: {', '.join(ids)}.",
        f"- This report, claims.md, claims.csv, details.md and every figure: `make figures` "
        f"(`python analysis/report.py results --scale {scale}` for the documents alone, from the default "
        "results folder).",
        "- The clock's calibration and validation: `python experiments/calibrate_clock.py`; the simulator's "
        "tables: `python experiments/simulate.py --validation results/sim`.",
        "",
        "## The details",
        "",
        "- [claims.md](claims.md): every claim of every experiment with its look, interval, margin and verdict "
        "at α per claim, and ACCO against the DDP at its best; [claims.csv](claims.csv): the same for tools.",
        "- [details.md](details.md): each figure's and table's section (settings, tables, where the time "
        "goes), the virtual clock (costs, validation) and the simulator.",
    ]


def claims_document(root: str, scale: str, outcomes: list) -> list[str]:
    return [
        f"# Every claim — {scale} scale",
        "",
        "Back to [REPORT.md](REPORT.md). "
        f"**The rule.** {rule_text()} The final loss is the mean training loss over the last "
        f"{int(TAIL * 100)}% of the samples. Modelled (virtual-clock) intervals are widened by the clock's "
        "validated error (analysis/modelled.py); outside its validated range a modelled claim has no verdict.",
        "",
        *claims_section(root, scale, outcomes),
        *baseline_section(root, scale),
    ]


def claims_csv(outcomes: list) -> str:
    rows = []
    for exp, claim, o in outcomes:
        look = o.look
        gap = look.gap if look is not None else None
        rows.append(
            {
                "experiment": exp,
                "question": claim.question,
                "claim": claim.name,
                "paper": claim.paper,
                "metric": claim.metric,
                "versus": claim.versus,
                "tests": claim.tests,
                "expected": claim.expect.value,
                "mean_a": o.mean_a,
                "mean_b": o.mean_b,
                "look": look.index if look is not None else None,
                "n": gap.n if gap is not None else 0,
                "gap_pct": gap.mean_pct if gap is not None else None,
                "lo_pct": gap.lo_pct if gap is not None else None,
                "hi_pct": gap.hi_pct if gap is not None else None,
                "confidence": gap.confidence if gap is not None else None,
                "model_error_pct": gap.widen_pct if gap is not None else None,
                "margin_pct": look.margin_pct if look is not None else None,
                "verdict": o.verdict.value if o.verdict is not None else "not run",
                "why_no_verdict": o.unvalidated,
                "p_value": o.p_value,
                "reproduced": o.reproduced,
            }
        )
    return pd.DataFrame(rows).to_csv(index=False, float_format="%.6g")


def details_document(root: str, scale: str) -> list[str]:
    out = [
        f"# Details — {scale} scale",
        "",
        "Back to [REPORT.md](REPORT.md). Each figure's and table's section: the setting, the numbers, where "
        "the time goes; then the virtual clock and the simulator (modelled time).",
        "",
    ]
    if scale == "rehearsal":
        out += [
            "The rehearsal runs each experiment's paper-scale configuration with only its sizes shrunk (a "
            "2-layer model, a few tens of steps, local copies of the datasets in their own formats, at most 4 "
            "ranks on the local Slurm cluster): it shows that every paper experiment runs end to end, not how "
            "the methods compare; its losses and times say nothing about the paper's claims.",
            "",
        ]
    if scale != "paper":
        out += comm_section(root, scale)
    for exp, title, fn in SECTIONS:
        out += [f'<a id="{exp}"></a>', "", f"## {title}", ""]
        if exp in FIGURES:
            out += [image(root, scale, exp), ""]
        else:
            rel = os.path.relpath(os.path.join(tables_dir(root, scale), f"{exp}.md"), os.path.join(root, scale))
            out += [f"Table: [{rel}]({rel})", ""]
        try:
            out += fn(root, scale)
        except MissingRuns as exc:  # one experiment not run yet must not hide the others; a bug is raised
            where = experiment_dir(root, scale, exp)
            out += [f"Not reproduced here: no usable runs under `{where}` ({type(exc).__name__}: {exc})."]
        out.append("")
    # modelled time, kept apart from the measured sections above: the virtual clock's readings of the
    # wall-clock claims (issue 31), and the schedules simulated past this machine (issue 34)
    # both anchors always: the first screen links to them whether or not there is anything to show
    clock = clock_section(root, scale) or "## The virtual clock\n\nNo virtual-clock runs here."
    out += ['<a id="virtual-clock"></a>', "", clock, ""]
    if scale != "rehearsal" and os.path.isdir(os.path.join(root, "sim")):
        out += ['<a id="simulated"></a>', "", simulation_section(root), ""]
    else:
        where = os.path.join(root, "sim")
        out += ['<a id="simulated"></a>', "", "## The simulator", "", f"No simulator tables under `{where}`.", ""]
    return out


def write_reproduction_report(root: str, scale: str = "cpu") -> list[str]:
    """Every document into <root>/<scale>/ (and REPORT.md's picture into its figures/); every path
    written, REPORT.md first."""
    folder = os.path.join(root, scale)
    os.makedirs(folder, exist_ok=True)
    figures: list[str] = []
    documents = build_documents(root, scale, figures)
    written = []
    for name, text in documents.items():
        atomic_write(os.path.join(folder, name), text)
        written.append(os.path.join(folder, name))
    return [*written, *figures]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root")
    ap.add_argument("--scale", default="cpu", choices=["cpu", "paper", "rehearsal"])
    args = ap.parse_args(argv)
    if not os.path.isdir(args.root):
        print(f"error: no results folder {args.root}", file=sys.stderr)
        return 2
    for path in write_reproduction_report(args.root, args.scale):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    pd.set_option("display.width", 200)
    sys.exit(main())
