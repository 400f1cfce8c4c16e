"""What make gpu-check's tests share: the methods they run (overrides of experiments/train.py) and
where they record what they measured."""

from __future__ import annotations

import json
import os

METHODS = {
    "ddp": ["method=ddp"],
    "ddp_flat": ["method=ddp", "method.impl=flat"],
    # the DDP at its best: on a GPU its hooks hand buckets to the communication stream from
    # autograd's device thread, which nothing else exercises
    "ddp_overlap": ["method=ddp", "method.impl=flat", "method.overlap_backward=true", "method.bucket_mb=0.01"],
    "dpu": ["method=dpu", "method.warmup_steps=1"],
    "wp": ["method=wp"],
    "acco": ["method=acco"],
    "diloco": ["method=diloco", "method.sync_every=4"],
    "streaming_diloco": ["method=streaming_diloco", "method.sync_every=4", "method.fragments=2"],
}


def record(name: str, key: str, value: dict) -> None:
    """Add a measurement to $ACCO_GPU_RESULTS/<name>.json (when gpu-check runs the tests), under
    a lock: gpu-check runs the tests in several processes at once (pytest-xdist)."""
    import fcntl

    out = os.environ.get("ACCO_GPU_RESULTS")
    if not out:
        return
    path = os.path.join(out, f"{name}.json")
    with open(os.path.join(out, f".{name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = {}
        if os.path.exists(path):
            with open(path) as f:
                data = json.load(f)
        data[key] = value
        with open(path, "w") as f:
            json.dump(data, f, indent=1)
