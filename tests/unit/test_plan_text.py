"""The plan of reproduce.py --plan and of a sweep's preview (acco/harness/preview.py plan_text): its
lines fit a terminal whatever the run folders' names (before: every line padded to the longest name,
272 columns on the committed results), and nothing of a name is lost where it wraps."""

from acco.harness.preview import PLAN_WIDTH, plan_text, wrapped_name

LONG = (
    "fig9/ddp_clock.micro_batch_s=0.2_clock.mode=virtual_clock.sync_s=0.025_method.bucket_mb=0.135_"
    "method.impl=flat_method.overlap_backward=True_model=gptneo_tiny_untied_optim.lr=0.0005_seed=0_"
    "train.eval_every=0_train.samples=4800_train.steps=None"
)


def planned(name: str, complete: bool, stale: list[str] | None = None) -> dict:
    return {"name": name, "exp": "fig9", "scale": "cpu", "cost": 10.0, "complete": complete,
            "stale": stale or [], "status": "completed" if complete or stale else None, "wall_s": 5.0}  # fmt: skip


def test_a_long_name_wraps_in_its_column_and_keeps_every_character():
    parts = wrapped_name(LONG, 72)
    assert "".join(parts) == LONG and all(len(p) <= 72 for p in parts) and len(parts) > 1
    assert all(p.endswith(("_", "/")) for p in parts[:-1])  # cut after a separator
    assert wrapped_name("x" * 150, 72) == ["x" * 72, "x" * 72, "x" * 6]  # no separator: cut where it must
    assert wrapped_name("fig5/ddp_seed=0", 72) == ["fig5/ddp_seed=0"]


def test_every_line_of_the_plan_fits_the_width():
    stale = ["method.overlap_backward", "clock.micro_batch_s", "train.samples", "optim.lr", "data.seq_len"]
    runs = [planned(LONG, True), planned(LONG.replace("seed=0", "seed=1"), False, stale), planned("fig9/a", False)]
    text = plan_text(runs, "cpu", [planned(LONG.replace("seed=0", "seed=7"), False)])
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= PLAN_WIDTH
    assert lines[0].startswith("plan: 3 runs, 1 complete (skipped), 2 to train, ETA ~")
    assert "".join(line.strip() for line in lines).count("train.steps=None") == 3  # every name whole
    assert any(line.strip().startswith("changed: method.overlap_backward") for line in lines)
    short = [line for line in lines if line.startswith("  fig9/a ")]
    assert len(short) == 1 and "to train" in short[0]  # a short name is padded to the column, no further
