"""Atomic checkpoints: a kill at any instant leaves either the old file or the new one, never half of one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import torch


class CheckpointError(ValueError):
    """A checkpoint that is missing or cannot be read; one line says which and why."""


def save_atomic(obj: dict, path: Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)  # atomic on POSIX: readers see the old or the new file
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_checkpoint(path: Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:  # torch raises many types for truncated or foreign files
        raise CheckpointError(
            f"checkpoint {path} cannot be read ({type(e).__name__}): it is corrupt or not ours"
        ) from None
    if not isinstance(obj, dict) or "actor_state_dict" not in obj or "iteration" not in obj:
        raise CheckpointError(f"checkpoint {path} lacks the policy or iteration: not a robot_rl checkpoint")
    return obj


def latest_checkpoint(run_dir: Path) -> Path:
    ckpts = sorted(Path(run_dir, "checkpoints").glob("model_*.pt"), key=lambda p: int(p.stem.split("_")[1]))
    if not ckpts:
        raise CheckpointError(f"no checkpoints in {Path(run_dir) / 'checkpoints'}")
    return ckpts[-1]
