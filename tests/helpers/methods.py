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
