"""Tables 1-3 of the paper, beside what the runs of a results folder measured.

Each `tableN(root, scale)` returns DataFrames and (with `save=True`) writes Markdown and CSV to
`<root>/<scale>/tables/tableN.{md,csv}`. The paper's numbers come from the project's own
`conf/experiment_info/<id>.yaml`; everything measured comes from the results folder alone.

Table 1 — memory per replica, bytes per parameter, with Ψ parameters, N workers, K = 12 bytes of
AdamW state per parameter (fp32 master, m, v), bf16 parameters / gradients / buffers (2 bytes):

    DDP                (2 + 2 + K) Ψ                 parameters, gradients, full optimizer state
    ZeRO-1             (2 + 2 + K/N) Ψ               optimizer state sharded
    ZeRO-2             (2 + (2 + K)/N) Ψ             + gradients sharded
    ZeRO-3             (2 + 2 + K) Ψ / N             + parameters sharded
    DiLoCo, SlowMo     (2 + 2 + K + 4) Ψ             no sharding (workers drift) + one fp32 outer vector
    CO2                (2 + 2 + K + 8) Ψ             no sharding + two fp32 outer vectors
    DPU, WP, ACCO      (2 + 2 + 2 + K/N) Ψ           ZeRO-1 + one bf16 model-sized communication buffer

At (K, N, Ψ) = (12, 64, 7.5e9) these give 120, 31.41, 16.64, 1.875, 150, 150, 180, 46.41 GB: rounded
to the nearest GB every one is the paper's value except ZeRO-2, 16.64 GB → 17, printed 16 in the
paper (the ZeRO paper's 16.6 GB truncated); no formula of this family that counts the gradient
shard gives 16 at nearest rounding, so the mismatch is reported, not hidden.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd
import yaml

from acco.analytic.table1 import TABLE1_FORMULAS, TABLE1_NAMES  # the formulas live beside the cost model
from acco.config.experiments import experiment_block, run_specs, scale_config
from acco.config.location import conf_dir
from acco.train.precision import precision_name  # train.precision (older runs: train.bf16)
from analysis.load import ACCO, BASELINE, discover_runs, load_summaries, method_label, spec_of
from analysis.measures import SMOOTH_STEPS, TARGET_COLUMN, loss_curve, time_to_loss
from analysis.render import to_markdown
from analysis.stats import paired_gap

CONF_EXPERIMENTS = os.path.join(conf_dir(), "experiment_info")  # id, title, paper
GB = 1e9


# -- small utilities ---------------------------------------------------------------------------
def paper_block(exp_id: str) -> dict:
    """The `paper` block of conf/experiment_info/<exp_id>.yaml (the paper's own numbers)."""
    return experiment_conf(exp_id).get("paper") or {}


def experiment_conf(exp_id: str) -> dict:
    path = os.path.join(CONF_EXPERIMENTS, f"{exp_id}.yaml")
    try:
        with open(path) as f:
            return yaml.safe_load(f) or {}
    except OSError:
        return {}


def round_half_up(x: float) -> int:
    return int(math.floor(x + 0.5))


def tables_dir(root: str, scale: str) -> str:
    return os.path.join(root, scale, "tables")


def write_table(
    root: str,
    scale: str,
    name: str,
    sections: list[tuple[str, pd.DataFrame]],
    title: str,
    notes: str = "",
    floatfmt: str = ".4g",
) -> list[str]:
    """`name`.md with every section, `name`.csv with the first, `name`_<i>.csv with the others."""
    out = tables_dir(root, scale)
    os.makedirs(out, exist_ok=True)
    md = [f"# {title}\n"]
    paths = []
    for i, (heading, df) in enumerate(sections):
        if heading:
            md.append(f"## {heading}\n")
        md.append(to_markdown(df, floatfmt))
        csv = os.path.join(out, f"{name}.csv" if i == 0 else f"{name}_{heading.split()[0].lower()}.csv")
        df.to_csv(csv, index=False)
        paths.append(csv)
    if notes:
        md.append(notes.strip() + "\n")
    md_path = os.path.join(out, f"{name}.md")
    with open(md_path, "w") as f:
        f.write("\n".join(md))
    return [md_path] + paths


def hms(seconds: float) -> str:
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "—"
    seconds = float(seconds)
    if seconds >= 3600:
        return f"{int(seconds // 3600)}h{int(round(seconds % 3600 / 60)):02d}"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.2f} s"


# -- Table 1 -----------------------------------------------------------------------------------
def table1_formulas(K: float = 12, N: int = 64, psi: float = 7.5e9, paper_gb: dict | None = None) -> pd.DataFrame:
    """The memory formulas at (K, N, Ψ), in GB (1e9 bytes), beside the paper's values."""
    if paper_gb is None:
        paper_gb = paper_block("table1").get("gb") or {}
    rows = []
    for key, (fn, text, counted) in TABLE1_FORMULAS.items():
        per_param = fn(K, N)
        gb = per_param * psi / GB
        paper = paper_gb.get(key)
        rows.append(
            {
                "method": TABLE1_NAMES[key],
                "key": key,
                "formula": text,
                "counted": counted,
                "bytes_per_param": per_param,
                "gb": gb,
                "gb_rounded": round_half_up(gb),
                "paper_gb": paper,
                "matches_paper": None if paper is None else round_half_up(gb) == paper,
            }
        )
    return pd.DataFrame(rows)


def _elem_bytes(info: dict, config: dict) -> int:
    device = "cuda" if str(info.get("device")).startswith("cuda") else "cpu"
    return 2 if precision_name((config or {}).get("train") or {}, device) == "bf16" else 4


def table1_measured(root: str, scale: str = "cpu", K: float = 12) -> pd.DataFrame:
    """Per-rank bytes measured by runs (summary.json), one row per (method, implementation, workers,
    device), beside the Table 1 formula evaluated at the run's precision and worker count."""
    runs = discover_runs(root, scale=scale)
    if not runs:
        return pd.DataFrame()
    summaries = load_summaries(root, scale=scale, runs=runs)
    rows, seen = [], set()
    for run, (_, s) in zip(runs, summaries.iterrows()):
        if s.get("param_bytes") is None or pd.isna(s.get("param_bytes")):
            continue
        key = (s["method"], s.get("impl"), s["world_size"], s.get("device"))
        if key in seen:
            continue
        seen.add(key)
        b = _elem_bytes(run.info, run.config)
        n = int(s["world_size"])
        params = float(s["param_bytes"]) / b
        measured = sum(
            float(s.get(k) or 0) for k in ("param_bytes", "grad_bytes", "optimizer_state_bytes", "comm_buffer_bytes")
        )
        spec = spec_of(s["method"])  # its Table 1 row: what a measured run of it corresponds to
        as_row = spec.table1_row if spec else None
        buffers = 1 if spec and spec.carries_gradients else 0  # the gradients waiting for the next sync
        formula = (b * (2 + buffers) + K / n) * params  # params, grads, [buffer] at b bytes; K/N state
        name = TABLE1_NAMES.get(as_row, "?") if as_row is not None else "?"
        if spec and spec.local:  # ours also holds a buffer, the outer momentum's shards, one fragment's staging
            fragments = int(((run.config.get("method") or {}).get("fragments")) or 1)
            formula = (3 * b + K + 4 + 4 / n + 4 / fragments) * params
            name = f"{name} + buffer, momentum/N, staging/F (F = {fragments})"
        rows.append(
            {
                "exp": run.exp,
                "method": method_label(s["method"]),
                "impl": s.get("impl"),
                "workers": n,
                "device": s.get("device"),
                "params": int(round(params)),
                "param_bytes": s["param_bytes"],
                "grad_bytes": s["grad_bytes"],
                "optimizer_state_bytes": s["optimizer_state_bytes"],
                "comm_buffer_bytes": s["comm_buffer_bytes"],
                "model_state_bytes": measured,
                "formula": name + f" at {b} B/elem",
                "formula_bytes": formula,
                "measured_over_formula": measured / formula if formula else None,
                "bytes_per_param": measured / params if params else None,
                "peak_rss_bytes": s.get("peak_rss_bytes"),
                "cuda_max_allocated_bytes": s.get("cuda_max_allocated_bytes"),
            }
        )
    df = pd.DataFrame(rows)
    return df.sort_values(["method", "workers"]).reset_index(drop=True) if not df.empty else df


def table1(root: str | None = None, scale: str = "cpu", save: bool = True) -> dict:
    p = paper_block("table1")
    # float(): PyYAML reads "7.5e9" (no dot before the exponent sign) as a string
    K, N, psi = float(p.get("K", 12)), int(p.get("N", 64)), float(p.get("psi", 7.5e9))
    formulas = table1_formulas(K, N, psi, p.get("gb") or {})
    measured = table1_measured(root, scale, K) if root else pd.DataFrame()
    out = {"formulas": formulas, "measured": measured, "paths": []}
    if save and root:
        bad = formulas[formulas["matches_paper"].eq(False)]  # None: no paper value
        notes = [f"K = {K:g}, N = {N}, Ψ = {psi:g}; GB = 1e9 bytes; rounded half up to the nearest GB."]
        for _, r in bad.iterrows():
            notes.append(
                f"Mismatch: {r['method']} {r['formula']} = {r['gb']:.2f} GB rounds to "
                f"{r['gb_rounded']}, the paper prints {r['paper_gb']} (its value truncated)."
            )
        notes.append(
            "Measured: per-rank maxima from summary.json; the formula row is evaluated at the run's "
            "element size (4 B fp32 on CPU, 2 B bf16 on GPU) and worker count; DDP is the "
            "ZeRO-1 baseline. PyTorch's ZeroRedundancyOptimizer keeps no separate fp32 master "
            "on fp32 runs, so its optimizer state is 8/N (not 12/N) bytes per parameter; the flat DDP "
            "(method.impl=flat) shares ACCO's machinery and so also holds the communication buffer "
            "ZeRO-1 itself does not need."
        )
        sections = [("Formulas", formulas)]
        if not measured.empty:
            sections.append((f"Measured ({scale} runs)", measured))
        out["paths"] = write_table(
            root, scale, "table1", sections, "Table 1 — memory per replica", notes="\n\n".join(notes)
        )
    return out


# -- Table 2 -----------------------------------------------------------------------------------
def _paper_layout(exp_id: str, runs) -> str | None:
    layout = scale_config(exp_id, "paper").get("layout")
    return str(layout) if layout else None


def table2(root: str, scale: str = "cpu", save: bool = True) -> dict:
    """Perplexities of the Fig. 7 / Fig. 11 models (summary.json final_eval) beside the paper's."""
    p = paper_block("table2")
    paper = p.get("perplexity") or {}
    rows, found = [], 0
    for src in p.get("sources") or ["fig11", "fig7"]:
        runs = discover_runs(root, src, scale)
        layout = _paper_layout(src, runs)
        summ = load_summaries(root, src, scale, runs=runs) if runs else pd.DataFrame()
        for method in (ACCO, BASELINE):
            ref = (paper.get(layout) or {}).get(method) or {}
            d = summ[summ["method"] == method] if not summ.empty else summ
            has = not d.empty and any(
                c in d and d[c].notna().any() for c in ("lambada_perplexity", "heldout_perplexity")
            )
            found += int(has)

            def mean(col, d=d):
                return float(d[col].mean()) if not d.empty and col in d and d[col].notna().any() else float("nan")

            rows.append(
                {
                    "setting": f"{layout} ({src})",
                    "source": src,
                    "method": method_label(method),
                    "runs": len(d),
                    "workers": str(int(d["world_size"].iloc[0])) if not d.empty else None,
                    "lambada_ppl": mean("lambada_perplexity"),
                    "lambada_acc": mean("lambada_accuracy"),
                    "heldout_ppl": mean("heldout_perplexity"),
                    "paper_lambada_ppl": ref.get("lambada"),
                    "paper_owt_ppl": ref.get("openwebtext"),
                }
            )
    df = pd.DataFrame(rows)
    out = {"table": df, "paths": [], "found": found}
    if save and found:
        notes = (
            "Measured: final evaluations of the runs (summary.json final_eval): LAMBADA perplexity and "
            "last-word accuracy, held-out perplexity (OpenWebText validation at paper scale, the "
            f"generated corpus's held-out split at CPU scale). Paper: Table 2. Scale: {scale}."
        )
        out["paths"] = write_table(root, scale, "table2", [("", df)], "Table 2 — perplexity", notes, floatfmt=".2f")
    return out


# -- Table 3 -----------------------------------------------------------------------------------
def target_column(exp_id: str) -> str:
    """The loss an experiment's wall-clock claims time (conf/experiment_info/<id>.yaml), so that
    Table 3 and the claims table read one definition; the training loss if it states none."""
    for claim in experiment_conf(exp_id).get("claims") or []:
        if claim.get("metric") in TARGET_COLUMN:
            return TARGET_COLUMN[claim["metric"]]
    return "train_loss"


def reduction_pct(t_ddp: float, t_acco: float) -> float:
    """(t_ddp − t_acco) / t_ddp in percent."""
    if (
        t_ddp is None
        or t_acco is None
        or not t_ddp
        or any(map(lambda v: isinstance(v, float) and math.isnan(v), (t_ddp, t_acco)))
    ):
        return float("nan")
    return 100.0 * (t_ddp - t_acco) / t_ddp


def _scale_layout(paper_layout: str | None, runs, scale: str) -> str | None:
    """The layout at `scale` that stands for `paper_layout` (same position in the experiment's runs)."""
    if not paper_layout or scale == "paper":
        return paper_layout
    for run in runs:
        pl: list[str] = []
        sl: list[str] = []
        for key, acc in (("paper", pl), (scale, sl)):
            for spec in run_specs(experiment_block(run.exp, key)):
                v = spec.get("layout")
                for x in v if isinstance(v, list) else [v] if v else []:
                    if str(x) not in acc:
                        acc.append(str(x))
        if paper_layout in pl and pl.index(paper_layout) < len(sl):
            return sl[pl.index(paper_layout)]
    return None


def paired_times(ddp: list, acco: list, target_loss: float | None, column: str) -> dict:
    """Per seed run by both methods: each one's total wall-clock and its time to the pair's target
    on `column` (see loss_curve): `target_loss`, else the worse of the pair's two final losses,
    which both reach."""
    a = {r.info.get("seed"): r for r in acco}
    b = {r.info.get("seed"): r for r in ddp}
    seeds = sorted(set(a) & set(b), key=str)
    out: dict = {
        "total": {BASELINE: {}, ACCO: {}},
        "to_target": {BASELINE: {}, ACCO: {}},
        "targets": [],
        "n": len(seeds),
    }
    for s in seeds:
        runs = {BASELINE: b[s], ACCO: a[s]}
        curves = {m: loss_curve(r, column) for m, r in runs.items()}
        finals = [c[1][-1] for c in curves.values() if len(c[1])]
        target = target_loss if target_loss is not None else (max(finals) if len(finals) == 2 else float("nan"))
        out["targets"].append(target)
        for m, r in runs.items():
            out["total"][m][s] = float(r.summary.total_wall_time_s or np.nan)
            out["to_target"][m][s] = time_to_loss(curves[m][0], curves[m][1], target)
    return out


def reduction_ci_text(times: dict) -> str:
    """ACCO's paired reduction against DDP, (t_ddp − t_acco)/t_ddp per seed: mean [95 % CI] (n)."""
    gap = paired_gap(times[ACCO], times[BASELINE])
    if gap.n == 0:
        return "–"
    if gap.n == 1:
        return f"{-gap.mean_pct:+.1f} % (n = 1)"
    return f"{-gap.mean_pct:+.1f} % [{-gap.hi_pct:+.1f}, {-gap.lo_pct:+.1f}] (n = {gap.n})"


def table3(root: str, scale: str = "cpu", save: bool = True, target_loss: float | None = None) -> dict:
    """Total wall-clock of DDP (ZeRO-1) vs ACCO per paper row, the time each takes to reach a target
    loss (default: the worse of the two final losses, so both reach it), and the reductions
    (t_ddp − t_acco)/t_ddp, beside the paper's Table 3."""
    p = paper_block("table3")
    rows, found = [], 0
    for spec in p.get("rows") or []:
        src = spec["source"]
        runs = discover_runs(root, src, scale)
        layout = _scale_layout(spec.get("layout"), runs, scale) if spec.get("layout") else None
        if spec.get("layout"):
            runs = [r for r in runs if layout is not None and r.info.get("layout") == layout]
        by = {m: [r for r in runs if r.method == m] for m in (BASELINE, ACCO)}
        row = {"name": spec.get("name"), "source": src, "layout": layout or spec.get("layout")}
        if by[BASELINE] and by[ACCO]:
            found += 1
        column = target_column(src)
        paired = paired_times(by[BASELINE], by[ACCO], target_loss, column)
        t = {m: float(np.mean(list(paired["total"][m].values()) or [np.nan])) for m in (BASELINE, ACCO)}
        ttt = {m: float(np.mean(list(paired["to_target"][m].values()) or [np.nan])) for m in (BASELINE, ACCO)}
        target = float(np.mean(paired["targets"])) if paired["targets"] else float("nan")
        paper_red = spec.get("reduction_pct")
        row.update(
            {
                "ddp_s": t[BASELINE],
                "acco_s": t[ACCO],
                "reduction_pct": reduction_pct(t[BASELINE], t[ACCO]),
                "target_loss": target,
                "loss": column,
                "ddp_to_target_s": ttt[BASELINE],
                "acco_to_target_s": ttt[ACCO],
                "reduction_to_target_pct": reduction_pct(ttt[BASELINE], ttt[ACCO]),
                "seeds": paired["n"],
                "reduction_ci": reduction_ci_text(paired["total"]),
                "reduction_to_target_ci": reduction_ci_text(paired["to_target"]),
                "paper_ddp": hms(spec.get("ddp_s")),
                "paper_acco": hms(spec.get("acco_s")),
                "paper_reduction_pct": reduction_pct(spec.get("ddp_s"), spec.get("acco_s")),
                "paper_reduction_printed_pct": paper_red,
            }
        )
        rows.append(row)
    df = pd.DataFrame(rows)
    out = {"table": df, "paths": [], "found": found}
    if save and found:
        notes = (
            "ddp_s / acco_s: total wall-clock (summary.json, mean over the seeds both methods ran); "
            "to_target: first time the loss the experiment's wall-clock claim reads (column loss: the "
            f"validation loss, or the training loss's {SMOOTH_STEPS}-step mean) is "
            "at or below the target, by default per seed the worse of the pair's two final losses "
            "(target_loss: their mean). Reductions are (t_ddp − t_acco) / t_ddp of the means; the _ci "
            "columns: the mean per-seed reduction with its 95 % interval (paired seeds). "
            f"paper_reduction_pct is computed from the paper's times; the paper prints the rounded value "
            f"where it gives one. Scale: {scale}."
        )
        out["paths"] = write_table(
            root, scale, "table3", [("", df)], "Table 3 — wall-clock, ZeRO-1 vs ACCO", notes, floatfmt=".4g"
        )
    return out


TABLES = {"table1": table1, "table2": table2, "table3": table3}
