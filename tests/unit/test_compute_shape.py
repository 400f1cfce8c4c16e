"""Compute that depends on the micro-batch's shape (acco/harness/simulation/compute.py): MFU by tokens,
one's own table, a constant --mfu, activation recomputation. Arithmetic only, no timing."""

import math
from dataclasses import replace

import pytest

from acco.harness.simulation.cli import build, check, main, parse_args
from acco.harness.simulation.compute import (
    MFU_TABLES,
    PRESET_TABLES,
    RECOMPUTE_FACTOR,
    MfuTable,
    forward_share,
    preset_table,
    read_table,
)
from acco.harness.simulation.models import MODELS
from acco.harness.simulation.sweep import Scenario, micro_batch_s, primitives
from acco.harness.simulation.topology import SIM_PRESETS, topology


def built(*args):
    a = parse_args(list(args))
    check(a)
    return build(a)


def per_token_s(sc: Scenario) -> float:
    return micro_batch_s(sc) / sc.model.tokens


def test_the_same_model_at_micro_batch_2_and_20_gets_different_compute_per_token():
    small = built("--gpu", "H100", "--model", "7b", "--micro-batch", "2")  # 2 x 4096 = 8192 tokens
    large = built("--gpu", "H100", "--model", "7b", "--micro-batch", "20")  # 81920 tokens
    table, P = MFU_TABLES["H100"], MODELS["7b"].params
    for sc in (small, large):  # 6·Ψ per token at the table's MFU for the micro-batch's tokens
        assert per_token_s(sc) == pytest.approx(6 * P / (989e12 * table.at(sc.model.tokens)))
    # 8192 tokens: between the 4096- and 12288-token points, log(2)/log(3) of the way
    w = math.log(2) / math.log(3)
    assert small.topo.mfu_at(8192) == pytest.approx(0.261 + w * (0.30 - 0.261))
    assert large.topo.mfu_at(81920) == 0.30  # flat beyond the last point
    assert per_token_s(small) / per_token_s(large) == pytest.approx(0.30 / small.topo.mfu_at(8192))
    assert per_token_s(small) > per_token_s(large)


def test_the_presets_keep_their_mfu_at_their_reference_runs_shape():
    # torchtitan's Llama 3 8B: 2 x 8192 tokens (the llama3-8b model's micro-batch) -> the old constants
    tokens = MODELS["llama3-8b"].tokens
    assert topology(gpu="A100").mfu_at(tokens) == 0.45
    assert topology(gpu="H100").mfu_at(tokens) == 0.30
    assert topology(gpu="A100").mfu_at(8192) == 0.45  # the A100 run itself: batch 1 x 8192
    for gpu in SIM_PRESETS:  # every preset has a table, the GPUs without runs of their own borrow one
        assert topology(gpu=gpu).mfu_table is MFU_TABLES[PRESET_TABLES[gpu]]
    assert preset_table("A100-40GB") is MFU_TABLES["A100"] and preset_table("H200") is MFU_TABLES["H100"]


def test_mfu_overrides_the_table():
    for mb in ("2", "20"):
        sc = built("--gpu", "H100", "--model", "7b", "--micro-batch", mb, "--mfu", "0.5")
        assert sc.topo.mfu_table is None and sc.topo.mfu_at(sc.model.tokens) == 0.5
        assert per_token_s(sc) == pytest.approx(6 * MODELS["7b"].params / (989e12 * 0.5))


def test_own_table_from_a_csv_file(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text("tokens,mfu\n16384,0.5\n1024,0.2\n\n# a comment\n")  # any order, header optional
    table = read_table(path)
    assert table.points == ((1024.0, 0.2), (16384.0, 0.5))
    assert table.at(4096) == pytest.approx(0.35)  # halfway in log(tokens)
    sc = built("--gpu", "H100", "--model", "7b", "--mfu-table", str(path))  # 4096 tokens
    assert sc.topo.mfu_table == table
    assert micro_batch_s(sc) == pytest.approx(6 * MODELS["7b"].params * 4096 / (989e12 * 0.35))


def test_a_built_in_table_by_name():
    sc = built("--gpu", "H100", "--model", "7b", "--mfu-table", "llm-foundry-H100")
    assert sc.topo.mfu_at(4096) == 0.374 and "llm-foundry-H100" in sc.topo.describe()


@pytest.mark.parametrize(
    "text,word",
    [
        ("tokens,mfu\n4096,abc\n", "line 2"),
        ("4096,0.4,9\n", "line 1"),
        ("4096,1.5\n", "(0, 1]"),
        ("4096,0\n", "(0, 1]"),
        ("4096,0.4\n4096,0.5\n", "increasing"),
        ("-5,0.4\n", "positive"),
        ("tokens,mfu\n", "no points"),
    ],
)
def test_bad_table_file_exits_2_with_one_line(tmp_path, capsys, text, word):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    assert main(["--mfu-table", str(path)]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --mfu-table") and word in lines[0]
    assert captured.out == ""


@pytest.mark.parametrize(
    "args,word",
    [
        (["--mfu-table", "/no/such/file.csv"], "cannot read"),
        (["--mfu", "0.4", "--mfu-table", "A100"], "give one"),
        (["--recompute", "--step-time", "1.0"], "--step-time"),
    ],
)
def test_bad_compute_flags_exit_2_with_one_line(capsys, args, word):
    assert main(args) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and word in lines[0]


def test_recompute_multiplies_compute_by_four_thirds():
    plain = built("--gpu", "A100", "--model", "13b")
    again = replace(plain, recompute=True)
    assert RECOMPUTE_FACTOR == pytest.approx(4 / 3)
    assert micro_batch_s(again) == pytest.approx(micro_batch_s(plain) * 4 / 3)
    # the extra forward runs in the backward: the forward is the same seconds, 1/4 of the longer micro-batch
    assert forward_share(True) * micro_batch_s(again) == pytest.approx(forward_share(False) * micro_batch_s(plain))
    assert forward_share(True) == pytest.approx(1 / 4)
    assert primitives(again)["micro_batch_s"] == pytest.approx(micro_batch_s(plain) * 4 / 3)
    assert built("--gpu", "A100", "--model", "13b", "--recompute").recompute


def test_a_measured_step_time_is_not_scaled_by_the_table_or_recompute():
    sc = built("--model", "7b", "--step-time", "2.0", "--accum", "4")
    assert micro_batch_s(sc) == 0.5 and micro_batch_s(replace(sc, recompute=True)) == 0.5


@pytest.mark.parametrize("name", list(MFU_TABLES))
def test_interpolation_is_monotone_between_points_and_flat_outside(name):
    table = MFU_TABLES[name]
    pts = table.points
    assert table.at(pts[0][0] / 10) == pts[0][1] and table.at(pts[-1][0] * 10) == pts[-1][1]
    for (t0, m0), (t1, m1) in zip(pts, pts[1:]):
        assert table.at(t0) == pytest.approx(m0) and table.at(t1) == pytest.approx(m1)
        grid = [t0 * (t1 / t0) ** (k / 20) for k in range(21)]
        values = [table.at(t) for t in grid]
        steps = [b - a for a, b in zip(values, values[1:])]
        assert all(s >= -1e-15 for s in steps) or all(s <= 1e-15 for s in steps)
        assert all(min(m0, m1) - 1e-15 <= v <= max(m0, m1) + 1e-15 for v in values)
        assert table.at(math.sqrt(t0 * t1)) == pytest.approx((m0 + m1) / 2)  # linear in log(tokens)


def test_a_table_checks_its_points():
    with pytest.raises(ValueError, match="increasing"):
        MfuTable("x", ((8192.0, 0.4), (4096.0, 0.5)))
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        MfuTable("x", ((4096.0, 1.2),))


def test_the_header_says_which_mfu_it_used(capsys):
    args = ["--gpu", "H100", "--model", "7b", "--nodes", "1", "--methods", "ddp", "--rounds", "8", "--recompute"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "MFU 0.261, the H100 table at 4096 tokens" in out and "recomputation" in out
