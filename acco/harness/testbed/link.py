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


class LinkConfigError(ValueError):
    pass


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
    """Raise LinkConfigError (one line) for a link this machine or launcher cannot make. Each
    link.* setting alone (a number >= 0, the MTU's range, a mode among LINK_MODES) is its field's
    check (LinkConfig), applied before this runs."""
    link = cfg.get("link")
    if link is None:
        return
    if not isinstance(link, dict):
        raise LinkConfigError(f"link must be a block like {{rate_mbit: 100, delay_ms: 0}}, got {link!r}")
    mode = link.get("mode", "auto")
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
