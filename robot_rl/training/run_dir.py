"""Run directories: resolved config, provenance (versions, git revision), status in meta.json."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from robot_rl.config import ConfigError
from robot_rl.store.run_status import process_start

PACKAGES = ("robot-rl", "torch", "mujoco", "rsl-rl-lib", "onnx", "onnxruntime", "hydra-core", "numpy")


def package_versions() -> dict[str, str]:
    out = {}
    for p in PACKAGES:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            out[p] = "not installed"
    return out


def git_revision() -> str:
    root = Path(__file__).resolve().parents[2]
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5)
        if rev.returncode != 0:
            return "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, timeout=5)
        return rev.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def write_json_atomic(path: Path, obj: dict | list) -> None:
    """Write JSON so that a reader never sees half a file (a temporary file, then an atomic rename)."""
    tmp = path.with_suffix(path.suffix + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(obj, indent=2, default=str))
    tmp.replace(path)


def new_run_name(task: str, algo: str, seed: int, runs_root: Path | None = None) -> str:
    """<task>_<algo>_s<seed>_<local time>; with runs_root, a -2, -3, ... suffix when a run started in the
    same second already has the name (a sweep or a script starts runs faster than that)."""
    name = f"{task}_{algo}_s{seed}_{time.strftime('%Y%m%d-%H%M%S')}"
    if runs_root is None:
        return name
    k, free = 1, name
    while (Path(runs_root) / free).exists():
        k += 1
        free = f"{name}-{k}"
    return free


def read_meta(run_dir: Path) -> dict:
    p = Path(run_dir) / "meta.json"
    if not p.is_file():
        return {}
    try:
        meta = json.loads(p.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"{p} is not valid JSON ({e})") from None
    if not isinstance(meta, dict):
        raise ConfigError(f"{p} is not a JSON object")
    return meta


def update_meta(run_dir: Path, **fields) -> dict:
    meta = read_meta(run_dir)
    meta.update(fields)
    write_json_atomic(Path(run_dir) / "meta.json", meta)
    if meta.get("status") != "running":
        _OPEN_RUNS.discard(Path(run_dir))
    return meta


# Runs this process marked "running" and has not finished: an error on the way out marks them failed.
_OPEN_RUNS: set[Path] = set()


def begin_run(run_dir: Path, meta: dict) -> None:
    """Write a new run's meta.json with status running and the process that runs it (host, pid, its start
    time): fail_open_runs closes it if the command dies, and true_status tells a killed one."""
    pid = os.getpid()
    owner = {"host": socket.gethostname(), "pid": pid, "pid_started": process_start(pid)}
    write_json_atomic(Path(run_dir) / "meta.json", {**meta, **owner, "status": "running"})
    _OPEN_RUNS.add(Path(run_dir))


def fail_open_runs(error: str, status: str = "failed") -> list[Path]:
    """Mark every run this process began and did not finish as failed (or interrupted), with the error's line."""
    failed = []
    for run_dir in sorted(_OPEN_RUNS):
        try:
            if read_meta(run_dir).get("status") == "running":
                update_meta(run_dir, status=status, finished_at=now_iso(), error=error)
                failed.append(run_dir)
        except (OSError, ConfigError):  # the run directory is gone or its meta.json broken: nothing to mark
            pass
    _OPEN_RUNS.clear()
    return failed
