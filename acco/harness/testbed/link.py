"""The `link:` block of the config: what interconnect local workers see.

    link.rate_mbit  bandwidth of every worker's link in Mbit/s (0 = unlimited)
    link.delay_ms   latency added to every step of a ring collective, in ms (0 = none)
    link.mode       auto | netns | delay
                    netns: one network namespace per worker, veth pairs to a bridge, tc tbf shaping
                    delay: an in-process sleep after each collective, proportional to its bytes
                    auto : netns where namespaces can be made (root, iproute2), else delay

This kernel has no netem, so latency is always an in-process sleep per ring step (both modes);
only the rate is shaped by the kernel. What a run used is recorded in summary.json as
`link: {mode: netns|delay|none, rate_mbit, delay_ms}`."""

from __future__ import annotations

import os
import shutil

MODES = ("auto", "netns", "delay")


class LinkConfigError(ValueError):
    pass


# The namespaces' packet size. Every packet costs the kernel the same CPU (TCP, veth, bridge, tbf) on
# the cores that also compute; a cluster's NICs offload that work and its Ethernet runs jumbo frames,
# so 9000 keeps the emulation's own CPU cost nearer a real link's (measured, 4 workers at 50 Mbit/s:
# 0.20 s of machine CPU per sync at 1500, 0.08 s at 9000).
DEFAULT_MTU, MIN_MTU, MAX_MTU = 9000, 576, 65535


def link_values(cfg: dict) -> tuple[float, float, str]:
    link = cfg.get("link") or {}
    return float(link.get("rate_mbit") or 0), float(link.get("delay_ms") or 0), link.get("mode") or "auto"


def is_active(cfg: dict) -> bool:
    rate, delay, _ = link_values(cfg)
    return rate > 0 or delay > 0


def netns_possible() -> str | None:
    """None when namespaces can be made here, else why not."""
    if os.geteuid() != 0:
        return "not root"
    if shutil.which("ip") is None:
        return "iproute2 (`ip`) is not installed"
    if not os.path.exists("/proc/self/ns/net"):
        return "no network namespaces in this kernel"
    return None


def check_link(cfg: dict, external_launcher: bool) -> None:
    """Raise LinkConfigError (one line) for link values that cannot apply."""
    link = cfg.get("link")
    if link is None:
        return
    if not isinstance(link, dict):
        raise LinkConfigError(f"link must be a block like {{rate_mbit: 100, delay_ms: 0}}, got {link!r}")
    for key in ("rate_mbit", "delay_ms"):
        value = link.get(key, 0)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
            raise LinkConfigError(
                f"link.{key} must be a number >= 0 (0 = unlimited), got {value!r}; set e.g. link.{key}=100"
            )
        if value < 0:
            raise LinkConfigError(
                f"link.{key} must be >= 0 (0 = unlimited), got {value}; set link.{key}=0 or a positive value"
            )
    mtu = link.get("mtu", DEFAULT_MTU)
    if isinstance(mtu, bool) or not isinstance(mtu, int) or not MIN_MTU <= mtu <= MAX_MTU:
        raise LinkConfigError(
            f"link.mtu must be a whole number of bytes in [{MIN_MTU}, {MAX_MTU}], got {mtu!r}; "
            f"use link.mtu={DEFAULT_MTU} (jumbo frames) or 1500 (plain Ethernet)"
        )
    mode = link.get("mode", "auto")
    if mode not in MODES:
        raise LinkConfigError(f"link.mode must be one of {', '.join(MODES)}, got {mode!r}")
    if not is_active(cfg):
        return
    if external_launcher and mode == "netns":
        raise LinkConfigError(
            "link.mode=netns needs the local launcher (it makes one namespace per worker); "
            "under torchrun or Slurm use link.mode=auto or delay (in-process delays)"
        )
    if mode == "netns" and link_values(cfg)[0] > 0:
        why = netns_possible()
        if why:
            raise LinkConfigError(
                f"link.mode=netns needs network namespaces ({why}); use link.mode=auto or link.mode=delay"
            )


def summary(cfg) -> dict:
    """What summary.json records about the link this run used."""
    rate, delay, _ = link_values(cfg)
    runtime = (cfg.get("link") or {}).get("runtime") or {}
    return {
        "mode": runtime.get("mode", "none"),
        "rate_mbit": rate,
        "delay_ms": delay,
        **({"mtu": runtime["mtu"]} if runtime.get("mtu") else {}),
        **({"fallback_reason": runtime["fallback_reason"]} if runtime.get("fallback_reason") else {}),
    }
