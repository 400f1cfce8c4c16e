"""This process's host memory and reads, from /proc (Linux): what the checkpoint measures about its
own saves and loads. Elsewhere every figure is None."""

from __future__ import annotations

import re

_KB = 1024


def _status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            found = re.search(rf"^{field}:\s+(\d+)\s+kB", f.read(), re.M)
    except OSError:
        return None
    return int(found.group(1)) * _KB if found else None


def rss_bytes() -> int | None:
    """Resident set size now."""
    return _status_kb("VmRSS")


def peak_rss_bytes() -> int | None:
    """The highest resident set size since the process started or reset_peak_rss()."""
    return _status_kb("VmHWM")


def reset_peak_rss() -> bool:
    """Start peak_rss_bytes() again from the RSS now (Linux >= 4.0); False where it cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def bytes_read() -> int | None:
    """Bytes this process has passed through read() calls so far (rchar: the page cache's too, so a
    file read twice counts twice)."""
    try:
        with open("/proc/self/io") as f:
            found = re.search(r"^rchar:\s+(\d+)", f.read(), re.M)
    except OSError:
        return None
    return int(found.group(1)) if found else None
