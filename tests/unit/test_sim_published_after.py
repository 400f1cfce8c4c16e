"""The validation rows added after the simulator was built (analysis/sim_published_after.py): each is
a command simulate.py's own parser accepts and runs, each names its source and a published value, and
validation.md's headline reports the within-1.5x share of the fitted rows and of the added rows apart."""

from __future__ import annotations

import math
import shlex

import pandas as pd
import pytest

from acco.harness.simulation.cli import build, check, parse_args
from analysis.sim_published import SCRIPT, Row, published_markdown, simulate, within_share
from analysis.sim_published_after import ADDED_SOURCES, added_rows, shares

ROWS = added_rows()


def test_between_15_and_25_rows_from_several_sources():
    assert 15 <= len(ROWS) <= 25
    assert len({r.source for r in ROWS}) >= 3


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.setting)
def test_each_command_parses_and_runs(row: Row):
    command = row.command()
    assert command.startswith(SCRIPT + " ")
    a = parse_args(shlex.split(command)[len(shlex.split(SCRIPT)) :])  # simulate.py's own parser
    check(a)  # raises BadInput on anything simulate.py would refuse
    build(a)
    ours, _ = simulate(row)
    assert math.isfinite(ours) and ours > 0


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.setting)
def test_each_row_names_its_source_and_a_published_value(row: Row):
    assert row.published > 0 and math.isfinite(row.published)
    assert row.quantity in ("tokens/s/GPU", "busbw GB/s")
    # every row's source is one the section cites in full (URL or repository and path)
    cited = [key for key, _ in ADDED_SOURCES]
    assert any(row.source.startswith(key) or key.startswith(row.source) for key in cited), row.source
    assert all(text for _, text in ADDED_SOURCES)


def test_throughput_rows_use_the_fsdp_schedule_of_their_strategy():
    tokens = [r for r in ROWS if r.kind == "tokens"]
    assert tokens and all(r.method in ("fsdp", "fsdp_grad_op") for r in tokens)
    assert all(("--recompute" in r.args) == bool(r.extra["recompute"]) for r in tokens)


def _df(flags: list[str], source: str = "s") -> pd.DataFrame:
    return pd.DataFrame(
        {
            "source": source,
            "setting": [f"row {i}" for i in range(len(flags))],
            "quantity": "q",
            "published": 1.0,
            "ours / published": [1.0 if f == "yes" else 3.0 for f in flags],
            "within 1.5x": flags,
            "ours / published, blocking DDP": math.nan,
            "note": "",
            "gap (named mechanism)": "",
            "command": "`x`",
        }
    )


def test_shares_are_counted_from_the_rows_apart():
    fitted, added = _df(["yes", "no", "yes", "yes"]), _df(["no", "yes"])
    assert within_share(fitted) == (3, 4)
    assert shares(fitted, added) == {"fitted": (3, 4), "added": (1, 2)}


def test_headline_reports_both_shares_and_the_added_section():
    fitted, added = _df(["yes", "no", "yes", "yes"], "fitted source"), _df(["no", "yes"], "added source")
    text = published_markdown(fitted, added, [("added source", "where it was read")])
    headline = next(line for line in text.splitlines() if line.startswith("**Rows used"))
    assert "3 of 4 within 1.5x" in headline and "1 of 2 within 1.5x" in headline
    assert "## Rows added after the model was built" in text
    assert text.index("## Rows added after") > text.index("## fitted source")
    assert "### added source" in text and "where it was read" in text
    # each source's rows once, under the heading of its part
    assert text.count("## fitted source") == 1 and text.count("added source\n") == 1
    # without added rows the headline is the fitted share alone, as before
    assert "**3 of 4 rows within 1.5x**" in published_markdown(fitted)
