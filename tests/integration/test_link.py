"""The emulated interconnect (acco/harness/testbed): a shaped link delivers about its rate, the namespaces
go away even when a run fails, the in-process fallback is used and recorded, bad link values are
refused up front."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from acco.engine.trace import load_spans
from acco.harness.testbed import emulate, netns
from acco.harness.testbed.delay import ring_bytes
from acco.harness.testbed.probe import probe
from tests.helpers.run_if import needs_netns
from tests.helpers.runs import SMALL_LM, run_train


def acco_namespaces() -> set[str]:
    return {n for n in netns.list_namespaces() if n.startswith("acco")}


def left_behind(before: set[str]) -> set[str]:
    """Namespaces made since `before` by this process or by a launcher that has exited: a leak.
    (Those of launchers still running belong to tests running beside this one.)"""
    leaked = set()
    for name in acco_namespaces() - before:
        m = netns._NAME.match(name)
        if m and (int(m.group(1)) == os.getpid() or not netns.pid_alive(int(m.group(1)))):
            leaked.add(name)
    return leaked


@pytest.mark.integration
@needs_netns
def test_shaped_link_moves_a_collective_at_about_its_rate():
    rate, nbytes = 100.0, 8_000_000
    before = acco_namespaces()
    res = probe(2, rate, nbytes, kind="reduce_scatter", mode="netns")
    sent, _ = ring_bytes("reduce_scatter", res["nbytes"], 2)
    expected = sent * 8 / (rate * 1e6)  # 0.32 s
    assert res["mode"] == "netns"
    assert res["rank0"]["gloo_ifname"] == netns.IFNAME and res["rank0"]["master_addr"].startswith(netns.SUBNET)
    # a wide band: the link is shaped (not loopback, ~100x faster) and not far slower than the rate
    assert 0.5 * expected < res["seconds"] < 2.0 * expected, res
    assert not left_behind(before)  # the probe removed its namespaces


@needs_netns
@pytest.mark.parametrize("mtu", [1500, 9000])
def test_namespace_links_use_the_configured_mtu(mtu):
    """link.mtu sets the packet size on both ends of every rank's veth (the kernel's CPU per sync
    scales with the packet count)."""
    topo = netns.RunNamespaces(2, 50.0, mtu=mtu).create()
    try:
        for r, ns in enumerate(topo.ranks):
            for where, dev in ((ns, netns.IFNAME), (topo.switch, f"p{r}")):
                out = subprocess.run(["ip", "-n", where, "link", "show", dev], capture_output=True, text=True)
                assert f" mtu {mtu} " in out.stdout, out.stdout + out.stderr
        assert topo.runtime()["mtu"] == mtu
    finally:
        topo.destroy()
    assert not set(topo.names) & acco_namespaces()


def test_delay_mode_sleeps_bytes_over_rate():
    rate, nbytes = 200.0, 4_000_000
    res = probe(2, rate, nbytes, kind="all_gather", mode="delay")
    sent, _ = ring_bytes("all_gather", res["nbytes"], 2)
    expected = sent * 8 / (rate * 1e6)  # 0.08 s on top of a ~free loopback collective
    assert res["mode"] == "delay" and res["namespaces"] == []
    assert 0.9 * expected <= res["seconds"] < 2.0 * expected, res


def test_fallback_to_delay_when_namespaces_are_not_possible(monkeypatch):
    monkeypatch.setattr(emulate, "netns_possible", lambda: "not root")
    cfg, topo = emulate.prepare({"link": {"rate_mbit": 50, "delay_ms": 0, "mode": "auto"}}, 2)
    assert topo is None
    assert cfg["link"]["runtime"] == {"mode": "delay", "fallback_reason": "not root"}
    cfg, topo = emulate.prepare({"link": {"rate_mbit": 0, "delay_ms": 0, "mode": "auto"}}, 2)
    assert topo is None and cfg["link"]["runtime"]["mode"] == "none"


@pytest.mark.integration
@needs_netns
def test_namespaces_removed_after_a_failing_run(tmp_path):
    before = acco_namespaces()
    out = tmp_path / "run"
    proc = run_train(
        [
            "method=acco",
            *SMALL_LM,
            "world_size=2",
            "train.steps=6",
            "link.rate_mbit=200",
            "fault.kill_rank=1",
            "fault.at_step=2",
            f"out_dir={out}",
        ],
        expect=None,
        timeout=300,
    )
    assert proc.returncode != 0, proc.stderr[-2000:]
    with open(out / "summary.json") as f:
        summary = json.load(f)
    assert summary["status"] == "failed"
    if "link" in summary:  # written by rank 0 (the launcher's own record of a failure has none)
        assert summary["link"]["mode"] == "netns"
    assert not left_behind(before), proc.stderr[-2000:]


@pytest.mark.integration
@needs_netns
def test_stale_namespaces_of_a_dead_launcher_are_swept():
    dead = 2**22 + 12345  # above the default pid_max: no such process
    while True:
        try:
            os.kill(dead, 0)
            dead += 1
        except ProcessLookupError:
            break
    name = f"acco{dead}x00beef-sw"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        assert name in netns.remove_stale()
        assert name not in netns.list_namespaces()
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


@pytest.mark.integration
def test_delay_mode_run_records_it_and_shapes_pytorch_ddp(tmp_path):
    out = tmp_path / "run"
    run_train(
        [
            "method=ddp",
            "method.impl=torch",
            *SMALL_LM,
            "world_size=2",
            "train.steps=2",
            "link.mode=delay",
            "link.rate_mbit=100",
            "link.delay_ms=2",
            f"out_dir={out}",
        ],
        timeout=300,
    )
    with open(out / "summary.json") as f:
        summary = json.load(f)
    assert summary["status"] == "completed"
    assert summary["link"] == {"mode": "delay", "rate_mbit": 100.0, "delay_ms": 2.0}
    # the delays reached PyTorch's DDP (comm hook) and ZeRO step: each lasted at least its sleep
    param_bytes = summary["per_rank"][0]["param_bytes"]
    rate = 100e6 / 8
    hooked = load_spans(str(out / "trace.json"), cat="communication")
    allreduce = [e["dur"] / 1e6 for e in hooked if e["name"].startswith("bwd + all_reduce")]
    zero = [e["dur"] / 1e6 for e in hooked if e["name"] == "adamw (zero-1) + broadcast"]
    assert allreduce and zero
    assert min(allreduce) >= 0.9 * (param_bytes / rate + 2 * 2e-3)  # 2(N-1)/N = 1 of the buffer, 2 steps
    assert min(zero) >= 0.9 * (0.5 * param_bytes / rate + 2e-3)  # (N-1)/N = 1/2, 1 step


BAD = [
    (["link.rate_mbit=-5"], "link.rate_mbit must be >= 0"),
    (["link.delay_ms=fast"], "link.delay_ms must be a number"),
    (["link.mode=wifi"], "link.mode must be one of"),
    (["link.mtu=100"], "link.mtu must be an integer in [576, 65535]"),
]


@pytest.mark.integration
@pytest.mark.parametrize("args,message", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_link_values_fail_fast(tmp_path, args, message):
    out = tmp_path / "run"
    proc = run_train([*args, "world_size=2", f"out_dir={out}"], expect=2, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], proc.stderr
    assert not out.exists()


@pytest.mark.integration
def test_link_under_an_external_launcher_is_in_process_delays(tmp_path, monkeypatch):
    """torchrun/srun ranks cannot be put in namespaces by us: a rate becomes in-process delays on
    top of the real network (recorded), and an explicit link.mode=netns is refused before starting."""
    for k, v in {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29999"}.items():
        monkeypatch.setenv(k, v)
    out = tmp_path / "run"
    proc = run_train(["link.rate_mbit=100", "link.mode=netns", f"out_dir={out}"], expect=2, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "under torchrun or Slurm" in lines[0], proc.stderr
    assert not out.exists()
    run_train([*SMALL_LM, "link.rate_mbit=100", "train.steps=2", f"out_dir={out}"], timeout=300)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["launcher"] == "torchrun"
    assert summary["link"]["mode"] == "delay" and summary["link"]["rate_mbit"] == 100
