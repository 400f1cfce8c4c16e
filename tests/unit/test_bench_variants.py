"""The bench speaks the trainer's vocabulary (acco/harness/bench/variants.py): its keys run exactly
the overrides they always ran, `--methods` / `--repeat` / `--delay-methods` take trainer spellings
(an old key with one notice, a spelling no key names as itself), a bad one is one line and exit 2,
and the bounds and the memory table read the method's facts where they read the key's name."""

from __future__ import annotations

import pandas as pd
import pytest

from acco.harness.bench import outputs, targets
from acco.harness.bench.main import parse_args
from acco.harness.bench.runner import NAME, RunSpec, overrides
from acco.harness.bench.variants import VARIANTS, rounds_per_step, sequential, sync_bytes, variant

# what runner.py's METHODS dict passed to the trainer before the table of variants
OLD_OVERRIDES = {
    "ddp": ["method=ddp", "method.impl=torch", "method.comm_hook=reduce_scatter_bf16"],
    "ddp_rs_fp32": ["method=ddp", "method.impl=torch", "method.comm_hook=reduce_scatter"],
    "ddp_allreduce": ["method=ddp", "method.impl=torch", "method.comm_hook=allreduce"],
    "ddp_flat": ["method=ddp", "method.impl=flat"],
    "ddp_overlap": ["method=ddp", "method.impl=flat", "method.overlap_backward=true", "method.bucket_mb=0.11"],
    "dpu": ["method=dpu", "method.warmup_steps=0"],
    "wp": ["method=wp", "method.warmup_steps=0"],
    "acco": ["method=acco"],
}


def test_every_key_runs_the_overrides_it_always_ran():
    assert [v.key for v in VARIANTS] == list(OLD_OVERRIDES)
    for key, expected in OLD_OVERRIDES.items():
        args = overrides(RunSpec(key, 2), 8, 4, f"/runs/grid_w2_r1_{key}_0", [])
        assert args[: len(expected)] == expected
        assert f"out_dir=/runs/grid_w2_r1_{key}_0" in args  # unquoted, as before


def test_the_defaults_are_spelled_the_trainers_way_and_keep_their_keys(capsys):
    a = parse_args([])
    assert a.methods == ["ddp", "ddp_flat", "ddp_overlap", "acco"]
    assert a.repeat == ["acco", "ddp_flat"] and a.delay_methods == ["ddp_flat", "acco"]
    assert capsys.readouterr().err == ""  # no notice for the defaults


def test_spellings_old_keys_and_open_ended_spellings(capsys):
    a = parse_args(
        ["--methods", "acco,ddp:impl=flat:overlap_backward=true:bucket_mb=0.11,ddp_rs_fp32,dpu:warmup_steps=5"]
    )
    assert a.methods == ["ddp_flat", "acco", "ddp_overlap", "ddp_rs_fp32", "dpu:warmup_steps=5"]
    assert "'ddp_rs_fp32' is now spelled 'ddp:impl=torch:comm_hook=reduce_scatter'" in capsys.readouterr().err
    spelled = variant("dpu:warmup_steps=5")
    assert spelled.overrides == ["method=dpu", "method.warmup_steps=5"]
    # its run folder holds ':' and '=': quoted for Hydra, and its name reads back to the key
    spec = RunSpec("dpu:warmup_steps=5", 2, ratio_target=1.0)
    assert f"out_dir='/runs/{spec.name()}'" in overrides(spec, 8, 4, f"/runs/{spec.name()}", [])
    m = NAME.match(spec.name())
    assert m is not None and m.group(4) == "dpu:warmup_steps=5"


@pytest.mark.parametrize("bad", ["sgd", "ddp:impl", "acco,nope:impl=flat"])
def test_a_bad_method_is_one_line_and_exit_2(bad, capsys):
    with pytest.raises(SystemExit) as exit_:
        parse_args(["--methods", bad])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err


def test_the_bounds_facts_are_the_old_tables():
    # targets.py's SEQUENTIAL_BYTES, OVERLAPPED_BACKWARD_BYTES for ddp_overlap, ROUNDS_PER_STEP, DDP_VARIANTS
    old_bytes = {"ddp_flat": 1.0, "ddp": 2.0, "ddp_rs_fp32": 3.0, "ddp_allreduce": 3.0, "ddp_overlap": 0.5}
    for v in VARIANTS:
        assert sync_bytes(v.key) == old_bytes.get(v.key)
        assert rounds_per_step(v.key) == (2 if v.key == "acco" else 1)
        assert sequential(v.key) == v.key.startswith("ddp")
    assert sync_bytes("ddp:impl=flat:bucket_mb=1") == 1.0  # a spelled DDP is priced by its settings
    assert sync_bytes("diloco") is None and not sequential("diloco")


def test_own_bounds_and_memory_rows_read_the_facts():
    row = {"group": "grid", "world": 2, "ratio_target": 0.0, "link_mode": "loopback", "samples_per_step": 8}
    grid = pd.DataFrame(
        [
            {**row, "method": "ddp_flat", "t_comp_round_s": 1.0, "t_sync_s": 0.5, "s_per_step": 1.5},
            {**row, "method": "ddp_overlap", "t_comp_round_s": 1.0, "t_sync_s": 0.5, "s_per_step": 1.25},
            {**row, "method": "acco", "t_comp_round_s": 1.0, "t_sync_s": 0.5, "s_per_step": 2.0},
        ]
    )
    bounds = targets.own_bound_rows(grid).set_index("method")
    assert bounds.loc["ddp_flat", "bound"] == "t_comp + t_sync" and bounds.loc["ddp_flat", "of_bound"] == 1.0
    assert bounds.loc["ddp_overlap", "bound"] == "t_comp + 0.5 t_sync"
    assert bounds.loc["acco", "bound"] == "max(t_comp, t_sync)" and bounds.loc["acco", "s_per_round"] == 1.0
    state = {"param_bytes": 400, "grad_bytes": 400, "comm_buffer_bytes": 0, "optimizer_state_bytes": 2400}
    mem = pd.DataFrame(
        [
            {**state, "method": m, "world": 2, "ratio_target": 0.0, "model_state_bytes": 4000, "peak_rss_bytes": 1}
            for m in ("ddp_overlap", "acco")
        ]
    )
    rows = outputs.memory_rows(mem).set_index("method")
    assert rows.loc["ddp_overlap", "table1_bytes"] == (4 * 2 + 12 / 2) * 100  # ZeRO-1
    assert rows.loc["acco", "table1_bytes"] == (4 * 3 + 12 / 2) * 100  # + one buffer
