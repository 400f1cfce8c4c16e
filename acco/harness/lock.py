"""One writer per run folder: the local launcher claims `<out_dir>/.running` (created exclusively,
holding its pid and host) before it writes anything there and removes it at the end, so two runs
started at once into the same results root never write into the same folder. A claim left by a
launcher that died (its pid gone on this host) is taken over."""

from __future__ import annotations

import json
import os
import socket
import time

LOCK = ".running"


class RunInUse(RuntimeError):
    def __init__(self, out_dir: str, holder: dict | None):
        who = f"pid {holder.get('pid')} on {holder.get('host')}" if holder else "another run"
        super().__init__(f"{out_dir} is being written by {who}; wait for it to finish or choose another out_dir")
        self.holder = holder


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (signal 0 only checks)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read(path: str) -> dict | None:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


class RunLock:
    def __init__(self, path: str):
        self.path = path

    def release(self) -> None:
        if (_read(self.path) or {}).get("pid") == os.getpid():
            os.remove(self.path)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


def claim(out_dir: str) -> RunLock:
    """Claim `out_dir` for this process; RunInUse when another live run holds it."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, LOCK)
    host = socket.gethostname()
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            holder = _read(path)
            if holder is None:  # being written this instant by the other claimant
                time.sleep(0.2)
                holder = _read(path)
            stale = holder is not None and holder.get("host") == host and not pid_alive(int(holder.get("pid", 0)))
            if not stale:
                raise RunInUse(out_dir, holder) from None
            os.remove(path)
            continue
        with os.fdopen(fd, "w") as f:
            json.dump({"pid": os.getpid(), "host": host, "since": time.strftime("%Y-%m-%dT%H:%M:%S")}, f)
        return RunLock(path)
    raise RunInUse(out_dir, _read(path))
