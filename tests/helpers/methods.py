"""Every method's overrides as the tests against the single-process reference run them (one place:
tests/integration/test_methods_vs_reference.py and test_auto_model_vs_reference.py share them)."""

METHODS = {
    "ddp": ["method=ddp"],
    "ddp_flat": ["method=ddp", "method.impl=flat"],
    # the reduce-scatter bucket by bucket in the last backward (buckets of 0.05 MiB: 6-7 of them)
    "ddp_overlap": ["method=ddp", "method.impl=flat", "method.overlap_backward=true", "method.bucket_mb=0.05"],
    "dpu": ["method=dpu", "method.warmup_steps=4"],
    "wp": ["method=wp"],
    "acco": ["method=acco"],
    "diloco": ["method=diloco", "method.sync_every=4"],
    "streaming_diloco": ["method=streaming_diloco", "method.sync_every=4", "method.fragments=2"],
}


def reference_run(method: str, world: int, steps: int, out_dir: str, *extra: str) -> list[str]:
    """The overrides of a run the reference replays: `method` on `world` ranks, deterministic,
    2 micro-batches a step, its final parameters saved; `extra` adds the test's own settings."""
    from tests.helpers.runs import SMALL_LM

    return [
        *METHODS[method],
        *SMALL_LM,
        f"world_size={world}",
        f"train.steps={steps}",
        "train.accum=2",
        "train.deterministic=true",
        "train.save_final_params=true",
        "optim.lr=2e-3",
        "optim.clip_norm=1.0",
        *extra,
        f"out_dir={out_dir}",
    ]


def equals_reference(out_dir: str, cfg: dict, steps: int):
    """Asserts that the run in `out_dir` ended on the single-process reference's parameters for its
    config (within rounding) and logged the reference's training losses; returns (the run's final
    parameters, the reference's replay)."""
    import csv
    import os

    import pytest
    import torch

    from acco.train.reference import replay
    from tests.helpers.rounding import rounding_mismatch

    final = torch.load(os.path.join(out_dir, "final_params.pt"))
    ref = replay(cfg)
    assert len(ref.history) == steps + 1
    mismatch = rounding_mismatch(final, ref.history[-1])
    assert mismatch is None, mismatch
    with open(os.path.join(out_dir, "metrics.csv")) as f:
        losses = [float(r["train_loss"]) for r in csv.DictReader(f)]
    assert losses == pytest.approx(ref.losses, rel=1e-4)
    return final, ref
