"""Whether a run marked running still is: meta.json records the host, pid and start time of its process."""

from __future__ import annotations

import socket
from pathlib import Path


def process_start(pid: int) -> int | None:
    """A process's start time in clock ticks since boot (Linux /proc), so a recycled pid is not mistaken for it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])  # field 22; the name in parentheses may hold spaces


def true_status(meta: dict) -> str:
    """A run's status as meta.json says, except that a run 'running' on this host whose process is gone (killed
    by SIGKILL, the machine's OOM killer, a lost job) is 'interrupted'."""
    status = str(meta.get("status") or "")
    if status != "running" or meta.get("host") != socket.gethostname() or not isinstance(meta.get("pid"), int):
        return status
    started = process_start(meta["pid"])
    if started is None or (meta.get("pid_started") is not None and started != meta["pid_started"]):
        return "interrupted"
    return status
