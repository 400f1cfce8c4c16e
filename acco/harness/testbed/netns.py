"""Network namespaces for local workers: one namespace per rank holding one end of a veth pair
(address 10.77.0.<rank+1>/24), the other ends on a bridge in a separate "switch" namespace, so
nothing touches the host's own network. With a rate, both directions of every link are shaped
with tc tbf (the rank's veth egress and its bridge port's egress).

Names are `acco<launcher pid>x<random>-...` so concurrent runs never collide, and namespaces left
behind by a launcher that died without cleaning up (SIGKILL) are removed by the next one."""

from __future__ import annotations

import atexit
import ctypes
import os
import re
import secrets
import signal
import subprocess
import threading

from ..lock import pid_alive

IFNAME = "acco0"  # the veth end inside each rank's namespace (what GLOO_SOCKET_IFNAME names)
SUBNET = "10.77.0"
CLONE_NEWNET = 0x40000000
NETNS_DIR = "/var/run/netns"
_NAME = re.compile(r"^acco(\d+)x[0-9a-f]+-")


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise OSError(f"ip {' '.join(args)}: {proc.stderr.strip() or proc.returncode}")
    return proc


def _tc(ns: str, dev: str, rate_mbit: float) -> None:
    """tbf with a short queue and a burst >= 64 KiB: a deep queue delays gloo's small control
    messages behind bulk data, a tiny one tail-drops (both measured to slow collectives)."""
    rate_bps = rate_mbit * 1e6
    burst = max(64 * 1024, int(rate_bps / 8 * 0.004))  # >= 4 ms of the rate
    _ip(
        "netns",
        "exec",
        ns,
        "tc",
        "qdisc",
        "replace",
        "dev",
        dev,
        "root",
        "tbf",
        "rate",
        f"{rate_mbit:g}mbit",
        "burst",
        str(burst),
        "latency",
        "20ms",
    )


def list_namespaces() -> list[str]:
    out = _ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def remove_stale() -> list[str]:
    """Remove acco namespaces whose launcher process is gone."""
    removed = []
    for name in list_namespaces():
        m = _NAME.match(name)
        if m and not pid_alive(int(m.group(1))):
            _ip("netns", "del", name, check=False)
            removed.append(name)
    return removed


class RunNamespaces:
    """The namespaces of one run. `create()` builds them; `destroy()` (idempotent) removes them and
    is also run at interpreter exit and on SIGTERM/SIGINT/SIGHUP of the launcher."""

    def __init__(self, world_size: int, rate_mbit: float, mtu: int = 1500):
        self.world_size = world_size
        self.rate_mbit = float(rate_mbit)
        self.mtu = int(mtu)
        self.tag = f"acco{os.getpid()}x{secrets.token_hex(3)}"
        self.switch = f"{self.tag}-sw"
        self.ranks = [f"{self.tag}-r{r}" for r in range(world_size)]
        self.addresses = [f"{SUBNET}.{r + 1}" for r in range(world_size)]
        self._created: list[str] = []
        self._lock = threading.Lock()

    @property
    def names(self) -> list[str]:
        return [self.switch, *self.ranks]

    def create(self) -> RunNamespaces:
        remove_stale()
        _install_cleanup(self)
        try:
            self._add_ns(self.switch)
            _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.switch, "link", "set", "br0", "up")
            for r, ns in enumerate(self.ranks):
                self._add_ns(ns)
                port = f"p{r}"
                _ip("link", "add", IFNAME, "netns", ns, "type", "veth", "peer", "name", port, "netns", self.switch)
                _ip("-n", self.switch, "link", "set", port, "master", "br0")
                _ip("-n", self.switch, "link", "set", port, "up")
                _ip("-n", ns, "addr", "add", f"{self.addresses[r]}/24", "dev", IFNAME)
                _ip("-n", ns, "link", "set", IFNAME, "mtu", str(self.mtu), "up")
                _ip("-n", self.switch, "link", "set", port, "mtu", str(self.mtu))
                _ip("-n", ns, "link", "set", "lo", "up")
                if self.rate_mbit > 0:
                    _tc(ns, IFNAME, self.rate_mbit)
                    _tc(self.switch, port, self.rate_mbit)
        except BaseException:
            self.destroy()
            raise
        return self

    def _add_ns(self, name: str) -> None:
        _ip("netns", "add", name)
        self._created.append(name)

    def destroy(self) -> None:
        with self._lock:
            while self._created:
                _ip("netns", "del", self._created.pop(), check=False)

    def runtime(self) -> dict:
        """What a worker needs to join its namespace (goes into cfg['link']['runtime'])."""
        return {
            "mode": "netns",
            "namespaces": list(self.ranks),
            "addresses": list(self.addresses),
            "ifname": IFNAME,
            "switch": self.switch,
            "mtu": self.mtu,
        }


_LIVE: list[RunNamespaces] = []
_HANDLERS_INSTALLED = False


def _cleanup_all() -> None:
    for topo in list(_LIVE):
        topo.destroy()


def _on_signal(signum, frame):
    _cleanup_all()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install_cleanup(topo: RunNamespaces) -> None:
    global _HANDLERS_INSTALLED
    _LIVE.append(topo)
    if _HANDLERS_INSTALLED:
        return
    _HANDLERS_INSTALLED = True
    atexit.register(_cleanup_all)
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) in (signal.SIG_DFL, None):
                signal.signal(sig, _on_signal)


def enter(name: str) -> None:
    """Move this process's calling thread (call it in the main thread, before any socket or
    communication thread exists: threads started later inherit it) into namespace `name`."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(os.path.join(NETNS_DIR, name), os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns into {name}: {os.strerror(err)}")
    finally:
        os.close(fd)
