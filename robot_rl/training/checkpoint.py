"""Checkpoints: written atomically, read back as data only, and they say which task they were trained on.

Atomic: a kill at any instant leaves either the old file or the new one, never half of one. Data only: every
load goes through load_checkpoint, which uses torch.load(weights_only=True), so a file holding anything but
tensors and plain containers (dict, list, tuple, str, int, float, bool, None) is refused before any of it runs;
python -m robot_rl.training.convert_checkpoint rewrites an older checkpoint you trust. Task record: the task
name, robot, observation layout and a hash of the task config, so that another task's run refuses it.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
import tempfile
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

RECORD_KEY = "task_record"
CONVERT_HINT = "python -m robot_rl.training.convert_checkpoint --trust"


class CheckpointError(ValueError):
    """A checkpoint that is missing, cannot be read, or is not for this run; one line says which and why."""


@dataclass(frozen=True)
class TaskRecord:
    """What a checkpoint was trained on. config_hash: task_config_hash of the run's task section (None when
    the trainer was built without one, e.g. in a test)."""

    task: str
    robot: str
    obs_layout: list
    config_hash: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict) -> TaskRecord:
        return TaskRecord(str(d["task"]), str(d["robot"]), list(d["obs_layout"]), d.get("config_hash"))


def _plain(obj):
    """JSON-able data as a checkpoint stores it (tuples become lists, inf stays inf)."""
    return json.loads(json.dumps(obj, default=str))


def task_config_hash(task_cfg) -> str:
    """sha256 of a run's task section (a dict or an OmegaConf node), canonical JSON. num_worlds is left out:
    it is how many copies run in parallel, not what the task is."""
    if not isinstance(task_cfg, dict):
        from omegaconf import OmegaConf

        task_cfg = OmegaConf.to_container(task_cfg, resolve=True)
    body = {k: v for k, v in task_cfg.items() if k != "num_worlds"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


def task_record(task, config_hash: str | None = None) -> TaskRecord:
    """The record a checkpoint of this task object carries."""
    return TaskRecord(str(task.name), str(task.robot), _plain(list(task.obs_layout)), config_hash)


def _layout_key(layout: list) -> list:
    # a per-drone term reads one drone whatever the team size: the same network flies any team
    return [{k: v for k, v in t.items() if not (t.get("per_drone") and k == "num_drones")} for t in layout]


def numpy_rng_to_plain(state: tuple) -> dict:
    """np.random.get_state() as tensors and scalars (weights_only=True reads no numpy arrays)."""
    name, key, pos, has_gauss, cached = state
    return {
        "bit_generator": str(name),
        "key": torch.from_numpy(np.asarray(key, dtype=np.int64)),
        "pos": int(pos),
        "has_gauss": int(has_gauss),
        "cached_gaussian": float(cached),
    }


def numpy_rng_from_plain(d: dict) -> tuple:
    key = np.asarray(d["key"].numpy() if isinstance(d["key"], torch.Tensor) else d["key"], dtype=np.uint32)
    return (d["bit_generator"], key, int(d["pos"]), int(d["has_gauss"]), float(d["cached_gaussian"]))


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


def read_data(path: Path) -> object:
    """torch.load with weights_only=True: tensors and plain containers, nothing executed. CheckpointError else."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        with warnings.catch_warnings():  # torch warns about pickle protocols on stderr: the error says enough
            warnings.simplefilter("ignore")
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        name = re.search(r"GLOBAL (\S+)", str(e))  # the class or function the pickle would have called
        if name is None:
            raise CheckpointError(
                f"checkpoint {path} cannot be read (UnpicklingError): it is corrupt or not ours; nothing in it was run"
            ) from None
        raise CheckpointError(
            f"checkpoint {path} holds more than tensors and plain data (it names {name.group(1)}): refused, nothing "
            f"in it was run; an older robot_rl checkpoint you trust converts with: {CONVERT_HINT} {path} NEW.pt"
        ) from None
    except Exception as e:  # torch raises many types for truncated or foreign files
        raise CheckpointError(
            f"checkpoint {path} cannot be read ({type(e).__name__}): it is corrupt or not ours"
        ) from None


def load_checkpoint(path: Path, expect: TaskRecord | None = None) -> dict:
    """Every checkpoint load: data only (read_data), a robot_rl checkpoint, and, with expect, of that task."""
    path = Path(path)
    obj = read_data(path)
    if not isinstance(obj, dict) or "actor_state_dict" not in obj or "iteration" not in obj:
        raise CheckpointError(f"checkpoint {path} lacks the policy or iteration: not a robot_rl checkpoint")
    if expect is not None:
        check_task(obj, path, expect)
    return obj


def record_of(ckpt: dict, path: Path) -> TaskRecord:
    try:
        return TaskRecord.from_dict(ckpt[RECORD_KEY])
    except (KeyError, TypeError, ValueError):
        raise CheckpointError(
            f"checkpoint {path} does not record its task (written before checkpoints did); convert it with the "
            f"run's config: {CONVERT_HINT} {path} NEW.pt --config <run>/config.yaml"
        ) from None


def check_task(ckpt: dict, path: Path, expect: TaskRecord) -> None:
    """Refuse a checkpoint of another task, robot or observation layout, in one line naming both."""
    got = record_of(ckpt, path)
    if got.task != expect.task or got.robot != expect.robot:
        raise CheckpointError(
            f"checkpoint {path} is of task '{got.task}' (robot {got.robot}), this run's task is '{expect.task}' "
            f"(robot {expect.robot}): refused"
        )
    if _layout_key(got.obs_layout) != _layout_key(expect.obs_layout):
        names = lambda layout: ",".join(f"{t.get('name')}[{t.get('dim')}]" for t in layout)  # noqa: E731
        raise CheckpointError(
            f"checkpoint {path} of task '{got.task}' reads observations {names(got.obs_layout)}; this run's task "
            f"'{expect.task}' gives {names(expect.obs_layout)}: refused"
        )


def check_same_config(ckpt: dict, path: Path, task_cfg, config_path: Path) -> None:
    """Resume: the run's config.yaml task section (task_cfg) must be the one the checkpoint was trained with."""
    record = record_of(ckpt, path)
    got, config_hash, name = record.config_hash, task_config_hash(task_cfg), str(task_cfg["name"])
    if record.task != name:
        raise CheckpointError(
            f"{config_path} names task '{name}', its checkpoint {path.name} is of task "
            f"'{record.task}': resume refused (config.yaml was edited)"
        )
    if got is None:
        raise CheckpointError(
            f"checkpoint {path} records no task config hash, so resume cannot tell whether "
            f"{config_path} was edited: refused (init_from= starts a new run from it)"
        )
    if got != config_hash:
        raise CheckpointError(
            f"{config_path}: the task section was edited after {path.name} was written (task config hash "
            f"{config_hash[:12]}, checkpoint {got[:12]}): resume refused; init_from= starts a new run from it"
        )


def latest_checkpoint(run_dir: Path) -> Path:
    # model_<iteration>.pt only: a stray model_best.pt is not one of the run's own
    ckpts = [p for p in Path(run_dir, "checkpoints").glob("model_*.pt") if p.stem.split("_", 1)[1].isdigit()]
    ckpts.sort(key=lambda p: int(p.stem.split("_", 1)[1]))
    if not ckpts:
        raise CheckpointError(f"no checkpoints in {Path(run_dir) / 'checkpoints'}")
    return ckpts[-1]
