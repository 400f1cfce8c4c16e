"""The two ends of the emulated link: the local launcher prepares it (`prepare`), each spawned
worker joins it (`join`) before it opens any socket."""

from __future__ import annotations

import os
import sys

from ...config.schema import DEFAULT_MTU
from ...engine.collectives import register_collective_hook, unregister_collective_hook
from . import delay
from .link import is_active, link_values, netns_possible
from .netns import RunNamespaces, enter


def prepare(cfg: dict, world_size: int) -> tuple[dict, RunNamespaces | None]:
    """The config the workers get (cfg['link']['runtime'] says what they join) and the namespaces
    to remove at the end (None without netns). Namespaces are made when there is a rate to shape
    and mode allows them; otherwise the rate (if any) and the latency are in-process delays."""
    link = dict(cfg.get("link") or {})
    if not is_active(cfg):
        link["runtime"] = {"mode": "none"}
        return dict(cfg, link=link), None
    rate, _, mode = link_values(cfg)
    why = None
    if mode != "delay" and rate > 0 and world_size > 1:
        why = netns_possible()
        if why is None:
            try:
                topo = RunNamespaces(world_size, rate, link.get("mtu", DEFAULT_MTU)).create()
            except OSError as exc:
                why = f"namespaces could not be created ({str(exc).splitlines()[0]})"
                if mode == "netns":
                    raise
            else:
                link["runtime"] = topo.runtime()
                return dict(cfg, link=link), topo
        print(
            f"acco: link: network namespaces not possible ({why}); emulating the link with in-process delays",
            file=sys.stderr,
            flush=True,
        )
    link["runtime"] = {"mode": "delay", **({"fallback_reason": why} if why else {})}
    return dict(cfg, link=link), None


def for_external_launcher(cfg: dict) -> dict:
    """Under torchrun or Slurm the workers are already on the real network: a link setting becomes
    in-process delays on top of it (the launcher there cannot make namespaces for the ranks)."""
    if not is_active(cfg):
        return dict(cfg, link=dict(cfg.get("link") or {}, runtime={"mode": "none"}))
    runtime = {"mode": "delay", "fallback_reason": "torchrun/Slurm ranks: in-process delays on top of the real network"}
    return dict(cfg, link=dict(cfg.get("link") or {}, runtime=runtime))


def join(cfg: dict, env) -> None:
    """In a worker, before init_process_group: enter this rank's namespace (gloo bound to its
    veth, the master at rank 0's address), and set up the in-process delays, charged to every
    training collective through the engine's collective hook."""
    runtime = (cfg.get("link") or {}).get("runtime") or {}
    rate, delay_ms, _ = link_values(cfg)
    if runtime.get("mode") == "netns":
        enter(runtime["namespaces"][env.local_rank])
        os.environ["GLOO_SOCKET_IFNAME"] = runtime["ifname"]
        env.master_addr = runtime["addresses"][0]
        delay.configure(0.0, delay_ms)  # the kernel shapes the rate; latency has no netem here
    elif runtime.get("mode") == "delay":
        delay.configure(rate, delay_ms)
    else:
        delay.configure(0.0, 0.0)
    if delay.active():
        register_collective_hook(delay.after)
    else:
        unregister_collective_hook(delay.after)
