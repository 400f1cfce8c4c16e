"""The issue's targets, evaluated on the benchmark's medians (reported, never asserted by tests):

1. ACCO's samples/s >= 0.9 x the ideal (perfect overlap) at every ratio;
2. with 1 of 4 workers 4x slower, ACCO/DDP samples/s >= 0.85 x 3.25;
3. ACCO at most 3 % slower than DDP on an unlimited link;
4. ACCO's memory <= ZeRO-1's + one model-sized buffer + 5 %."""

from __future__ import annotations

import os

import pandas as pd


def _get(df: pd.DataFrame, **where):
    sel = df
    for k, v in where.items():
        sel = sel[sel[k] == v]
    return sel.iloc[0] if len(sel) else None


def ideal_rows(grid: pd.DataFrame) -> pd.DataFrame:
    """Per (world, ratio): ACCO's samples/s beside the perfect-overlap ideal, computed from the
    sequential reference's separately measured compute and sync: samples per round / max(t_comp, t_sync)."""
    rows = []
    for (world, ratio), g in grid.groupby(["world", "ratio_target"]):
        ref = _get(g, method="ddp_flat")
        acco = _get(g, method="acco")
        if ref is None or acco is None:
            continue
        ideal = ref["samples_per_step"] / max(ref["t_comp_round_s"], ref["t_sync_s"])
        # ACCO's committed step is two rounds
        rows.append(
            {
                "world": world,
                "ratio_target": ratio,
                "ratio_measured": ref["t_sync_s"] / ref["t_comp_round_s"],
                "rate_mbit": ref["rate_mbit"],
                "t_comp_round_s": ref["t_comp_round_s"],
                "t_sync_s": ref["t_sync_s"],
                "ideal_samples_per_s": ideal,
                "acco_samples_per_s": acco["samples_per_s"],
                "acco_over_ideal": acco["samples_per_s"] / ideal,
                "acco_overlap_efficiency": acco["overlap_efficiency"],
                "acco_t_comp_round_s": acco["t_comp_round_s"],
                "acco_t_sync_s": acco["t_sync_s"],
                "acco_round_s": acco["s_per_step"] / 2,
            }
        )  # an ACCO committed step is two rounds
    return pd.DataFrame(rows)


def evaluate(grid: pd.DataFrame, hetero: pd.DataFrame) -> pd.DataFrame:
    out = []
    ideal = ideal_rows(grid)
    for _, r in ideal.iterrows():
        ok = r["acco_over_ideal"] >= 0.9
        why = "" if ok else _ideal_why(r)
        out.append(
            {
                "target": f"ACCO >= 0.9 x ideal, {int(r['world'])} workers, ratio ~{r['ratio_target']:g} "
                f"(measured {r['ratio_measured']:.2f})",
                "value": r["acco_over_ideal"],
                "threshold": 0.9,
                "pass": bool(ok),
                "numbers": f"ACCO {r['acco_samples_per_s']:.1f} vs ideal {r['ideal_samples_per_s']:.1f} samples/s "
                f"(t_comp {r['t_comp_round_s']:.3f} s, t_sync {r['t_sync_s']:.3f} s per round)",
                "why": why,
            }
        )
    if hetero is not None and len(hetero):
        a, d = _get(hetero, method="acco"), _get(hetero, method="ddp")
        if a is not None and d is not None:
            ratio = a["samples_per_s"] / d["samples_per_s"]
            ok = ratio >= 0.85 * 3.25
            out.append(
                {
                    "target": f"1 of {int(a['world'])} workers {a['factor']:g}x slower: ACCO/DDP samples/s "
                    f">= 0.85 x 3.25",
                    "value": ratio,
                    "threshold": 0.85 * 3.25,
                    "pass": bool(ok),
                    "numbers": f"ACCO {a['samples_per_s']:.1f}, DDP {d['samples_per_s']:.1f} samples/s",
                    "why": "" if ok else _hetero_why(a, d),
                }
            )
    for world, g in grid[grid["ratio_target"] == 0].groupby("world"):
        a, d = _get(g, method="acco"), _get(g, method="ddp")
        if a is None or d is None:
            continue
        ratio = a["samples_per_s"] / d["samples_per_s"]
        ok = ratio >= 0.97
        out.append(
            {
                "target": f"ACCO at most 3% slower than DDP, unlimited link, {int(world)} workers",
                "value": ratio,
                "threshold": 0.97,
                "pass": bool(ok),
                "numbers": f"ACCO {a['samples_per_s']:.1f}, DDP {d['samples_per_s']:.1f} samples/s",
                "why": ""
                if ok
                else (
                    f"ACCO's sync runs on a thread beside compute; on loopback the sync "
                    f"({a['t_sync_s']:.3f} s) is small and the thread competes with "
                    f"compute for the cores"
                ),
            }
        )
        b = 2 if pd.notna(a.get("cuda_max_allocated_bytes")) else 4  # bytes per element (fp32 on CPU)
        psi = a["param_bytes"] / b
        zero1 = (2 * b + 12 / int(world)) * psi  # Table 1's ZeRO-1 at this precision, K = 12
        ok = a["model_state_bytes"] <= 1.05 * (zero1 + b * psi)
        out.append(
            {
                "target": f"ACCO memory <= ZeRO-1 (Table 1 formula) + one model-sized buffer + 5% "
                f"({int(world)} workers)",
                "value": a["model_state_bytes"] / (zero1 + b * psi),
                "threshold": 1.05,
                "pass": bool(ok),
                "numbers": f"ACCO {a['model_state_bytes'] / 1e6:.2f} MB (params + grads + buffer + optimizer "
                f"shard), ZeRO-1 formula {zero1 / 1e6:.2f} MB, buffer {b * psi / 1e6:.2f} MB",
                "why": "" if ok else "see memory.csv",
            }
        )
        for label, key in (
            ("model-state bytes vs PyTorch ZeRO-1", "model_state_bytes"),
            ("peak RSS vs PyTorch ZeRO-1", "peak_rss_bytes"),
        ):
            bound = 1.05 * (d[key] + d["param_bytes"])
            ok = a[key] <= bound
            out.append(
                {
                    "target": f"ACCO memory <= ZeRO-1 + one model-sized buffer + 5% ({label}, {int(world)} workers)",
                    "value": a[key] / (d[key] + d["param_bytes"]),
                    "threshold": 1.05,
                    "pass": bool(ok),
                    "numbers": f"ACCO {a[key] / 1e6:.2f} MB, ZeRO-1 {d[key] / 1e6:.2f} MB, model "
                    f"{d['param_bytes'] / 1e6:.2f} MB",
                    "why": "" if ok else _memory_why(a, d, key),
                }
            )
    return pd.DataFrame(out)


def _ideal_why(r) -> str:
    own = max(r["acco_t_comp_round_s"], r["acco_t_sync_s"])
    text = (
        f"an ACCO round took {r['acco_round_s']:.3f} s vs the ideal max({r['t_comp_round_s']:.3f}, "
        f"{r['t_sync_s']:.3f}) s; overlapped, its own compute took {r['acco_t_comp_round_s']:.3f} s per round "
        f"and its sync {r['acco_t_sync_s']:.3f} s (overlap efficiency {r['acco_overlap_efficiency']:.2f})"
    )
    if r["acco_t_comp_round_s"] > 1.1 * r["t_comp_round_s"]:
        return text + (
            f": the compute slowed down while overlapped — {int(r['world'])} workers' compute and "
            f"their communication threads' TCP work share {os.cpu_count()} cores (an in-process delay "
            f"link, link.mode=delay, has no such contention)"
        )
    return text + (
        f": {r['acco_round_s'] - own:.3f} s per round went outside both lanes (copies, waiting for "
        f"the slowest rank, scheduling on a loaded machine)"
    )


def _hetero_why(a, d) -> str:
    # the numbers that decide it; the ideal 3.25 assumes the fast workers' speed does not change
    # when the slow one idles, which a machine with fewer cores than workers does not give
    return (
        f"ACCO computed {a['samples_per_step']:.0f} samples per committed step (two rounds) in "
        f"{a['s_per_step']:.3f} s, DDP {d['samples_per_step']:.0f} in {d['s_per_step']:.3f} s; the slow worker "
        f"sleeps (factor-1) x its compute, so on {os.cpu_count()} cores the others' speed changes while it sleeps"
    )


def _memory_why(a, d, key) -> str:
    if key == "model_state_bytes":
        return (
            f"optimizer state: ACCO {a['optimizer_state_bytes'] / 1e6:.2f} MB (fp32 master + m + v, Table 1's "
            f"K = 12 B/param on its shard), PyTorch's ZeroRedundancyOptimizer "
            f"{d['optimizer_state_bytes'] / 1e6:.2f} MB "
            f"(m + v only: with fp32 parameters on CPU it keeps no separate master); against Table 1's "
            f"ZeRO-1 formula ACCO's bytes are in memory.csv (measured_over_table1)"
        )
    return (
        f"ACCO's peak RSS is {(a[key] - d[key]) / 1e6:.1f} MB above PyTorch DDP's while its model-sized buffer "
        f"is {d['param_bytes'] / 1e6:.2f} MB: at this tiny model the per-process runtime dominates (ACCO adds a "
        f"communication thread with its own gloo process group); its model-state bytes match Table 1 "
        f"(memory.csv)"
    )
