"""Time one collective over the emulated link, outside any training run: what the link really
delivers (tests/integration/test_link.py checks it against bytes/rate).

    python -m acco.harness.testbed.probe --world 2 --rate 100 --mbytes 8 [--mode auto|netns|delay]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time


def _worker(local_rank: int, cfg: dict, envs, kind: str, numel: int, reps: int, out_dir: str) -> None:
    import torch
    import torch.distributed as dist

    from ...engine.collectives import all_gather_into, all_reduce_sum, reduce_scatter_sum
    from ..launch import init_process_group
    from .emulate import join

    env = envs[local_rank]
    join(cfg, env)
    env.export()
    torch.set_num_threads(1)
    init_process_group(env, torch.device("cpu"), 120)
    world = env.world_size
    group = dist.new_group(list(range(world)))  # the ring reduce-scatter needs a registered group
    full = torch.ones(numel)
    shard = torch.empty(numel // world)
    times = []
    for _ in range(reps + 1):  # the first one also connects gloo's pairs
        dist.barrier()
        start = time.perf_counter()
        if kind == "reduce_scatter":
            reduce_scatter_sum(full, shard, group)
        elif kind == "all_gather":
            all_gather_into(full, full.chunk(world)[env.rank], group)
        else:
            all_reduce_sum(full, group)
        times.append(time.perf_counter() - start)
    with open(os.path.join(out_dir, f"rank{env.rank}.json"), "w") as f:
        json.dump(
            {"times": times[1:], "gloo_ifname": os.environ.get("GLOO_SOCKET_IFNAME"), "master_addr": env.master_addr}, f
        )
    dist.destroy_process_group()


def probe(
    world: int,
    rate_mbit: float,
    nbytes: int,
    kind: str = "reduce_scatter",
    mode: str = "auto",
    delay_ms: float = 0.0,
    reps: int = 3,
) -> dict:
    """Median seconds of `kind` over a float32 buffer of `nbytes` among `world` local processes."""
    import torch.multiprocessing as mp

    from ..launch import local_envs
    from .emulate import prepare

    cfg: dict = {"link": {"rate_mbit": rate_mbit, "delay_ms": delay_ms, "mode": mode}}
    numel = (nbytes // 4) // world * world
    topo = None
    with tempfile.TemporaryDirectory() as out_dir:
        try:
            cfg, topo = prepare(cfg, world)
            mp.start_processes(
                _worker,
                args=(cfg, local_envs(world), kind, numel, reps, out_dir),
                nprocs=world,
                join=True,
                start_method="spawn",
            )
        finally:
            if topo is not None:
                topo.destroy()
        ranks = []
        for r in range(world):
            with open(os.path.join(out_dir, f"rank{r}.json")) as f:
                ranks.append(json.load(f))
    per_rep = [max(r["times"][i] for r in ranks) for i in range(reps)]
    return {
        "mode": cfg["link"]["runtime"]["mode"],
        "seconds": statistics.median(per_rep),
        "all_seconds": per_rep,
        "nbytes": numel * 4,
        "world": world,
        "namespaces": (topo.names if topo is not None else []),
        "rank0": ranks[0],
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--rate", type=float, default=100.0, help="Mbit/s")
    p.add_argument("--delay-ms", type=float, default=0.0)
    p.add_argument("--mbytes", type=float, default=8.0)
    p.add_argument("--kind", default="reduce_scatter", choices=["reduce_scatter", "all_gather", "all_reduce"])
    p.add_argument("--mode", default="auto", choices=["auto", "netns", "delay"])
    a = p.parse_args(argv)
    from .delay import ring_bytes

    res = probe(a.world, a.rate, int(a.mbytes * 1e6), a.kind, a.mode, a.delay_ms)
    sent, _ = ring_bytes(a.kind, res["nbytes"], a.world)
    expect = sent * 8 / (a.rate * 1e6) if a.rate else float("nan")
    print(
        f"{a.kind} of {res['nbytes'] / 1e6:.1f} MB, {a.world} ranks, {res['mode']} link at {a.rate:g} Mbit: "
        f"{res['seconds']:.3f} s (bytes/rate {expect:.3f} s; runs {[round(t, 3) for t in res['all_seconds']]})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
