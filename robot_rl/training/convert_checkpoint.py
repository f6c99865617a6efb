"""One-off converter: an older robot_rl checkpoint -> one that loads as data (torch.load weights_only=True).

    python -m robot_rl.training.convert_checkpoint --trust OLD.pt NEW.pt [--config RUN/config.yaml]

Older checkpoints stored numpy's RNG state as a numpy array, which torch's data-only loader refuses. With --trust
(an older file's acknowledgement), OLD is read by that same loader (weights_only=True) allowing exactly the numpy
globals an array needs (NUMPY_ARRAY_GLOBALS): nothing in the file can run code, and a file that names any other
global is refused. The result holds tensors and plain containers only, plus the task record
(task, robot, observation layout, task config hash) taken from the run's config.yaml: by default the one of
OLD's run (OLD's folder or the folder above checkpoints/). NEW may be OLD. Exit code 0, or 2 with one line.
"""

from __future__ import annotations

import argparse
import pickle
import sys
import warnings
from pathlib import Path

import numpy as np
import torch

from robot_rl.training.checkpoint import (
    RECORD_KEY,
    CheckpointError,
    load_checkpoint,
    numpy_rng_to_plain,
    read_data,
    save_atomic,
    task_config_hash,
    task_record,
)

PLAIN = (str, int, float, bool, type(None), torch.Tensor)
# what unpickling a numpy array takes (torch.serialization.get_unsafe_globals_in_checkpoint of an old checkpoint)
NUMPY_ARRAY_GLOBALS = [np.ndarray, np._core.multiarray._reconstruct, np.dtype, type(np.dtype(np.uint32))]


def to_data(obj, where: str = "checkpoint"):
    """Tensors and plain containers only: numpy arrays become tensors, numpy scalars Python numbers."""
    if isinstance(obj, dict):
        return {k: to_data(v, f"{where}.{k}") for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_data(v, f"{where}[{i}]") for i, v in enumerate(obj))
    if isinstance(obj, np.ndarray):
        return torch.from_numpy(np.array(obj))
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, PLAIN):
        return obj
    raise CheckpointError(f"{where} is a {type(obj).__module__}.{type(obj).__qualname__}, which has no data form")


def _extra_globals(path: Path) -> str:
    allowed = {f"{g.__module__}.{g.__qualname__}" for g in NUMPY_ARRAY_GLOBALS}
    names = [n for n in torch.serialization.get_unsafe_globals_in_checkpoint(path) if n not in allowed]
    return ", ".join(names[:5]) or "unknown"


def _run_config_path(old: Path) -> Path:
    for folder in (old.parent, old.parent.parent):
        if (folder / "config.yaml").is_file():
            return folder / "config.yaml"
    raise CheckpointError(f"no config.yaml beside {old} or in its run directory: give the run's with --config")


def convert(old: Path, new: Path, config: Path | None = None, trust: bool = False) -> dict:
    """Write NEW from OLD; returns the converted checkpoint (verified by load_checkpoint with its task)."""
    old, new = Path(old), Path(new)
    if not old.is_file():
        raise CheckpointError(f"checkpoint not found: {old}")
    try:
        ckpt = read_data(old)  # already data: only the task record may be missing
    except CheckpointError:
        if not trust:
            raise CheckpointError(
                f"{old} holds numpy arrays, which only pickle globals rebuild: convert it with --trust (the data-only "
                "loader then allows numpy's array globals and nothing else; no code in the file runs)"
            ) from None
        with warnings.catch_warnings(), torch.serialization.safe_globals(NUMPY_ARRAY_GLOBALS):
            warnings.simplefilter("ignore")
            try:
                ckpt = torch.load(old, map_location="cpu", weights_only=True)
            except pickle.UnpicklingError:
                raise CheckpointError(f"{old} names globals beyond numpy's arrays ({_extra_globals(old)}): refused, "
                                      "nothing in it was run") from None  # fmt: skip
            except Exception as e:
                raise CheckpointError(f"{old} cannot be read ({type(e).__name__}): it is corrupt") from None
        print(
            f"convert_checkpoint: read {old} with numpy's array globals allowed (weights_only=True) because --trust "
            "was given",
            file=sys.stderr,
        )
    if not isinstance(ckpt, dict) or "actor_state_dict" not in ckpt or "iteration" not in ckpt:
        raise CheckpointError(f"{old} lacks the policy or iteration: not a robot_rl checkpoint")
    rng = ckpt.get("rng") or {}
    if isinstance(rng.get("numpy"), tuple):  # np.random.get_state(): ('MT19937', array, pos, has_gauss, cached)
        rng["numpy"] = numpy_rng_to_plain(rng["numpy"])
    ckpt = to_data(ckpt)
    record = _record_from_config(Path(config) if config else _run_config_path(old))
    ckpt.setdefault(RECORD_KEY, record.to_dict())
    save_atomic(ckpt, new)
    return load_checkpoint(new, expect=record)  # what every later load will do


def _record_from_config(config: Path):
    """The task record of a run's config.yaml: its task built as training builds it (one world)."""
    from omegaconf import OmegaConf

    from robot_rl.envs import make_env

    cfg = OmegaConf.load(config)
    env = make_env(cfg, num_worlds=1)
    try:
        return task_record(env.task, task_config_hash(cfg.task))
    finally:
        env.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m robot_rl.training.convert_checkpoint", description=__doc__)
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("old", type=Path)
    p.add_argument("new", type=Path)
    p.add_argument("--config", type=Path, help="the run's config.yaml (default: the one of OLD's run)")
    p.add_argument("--trust", action="store_true", help="OLD is yours: let pickle read it (it can run code)")
    args = p.parse_args(argv)
    from robot_rl.config import ConfigError

    try:
        ckpt = convert(args.old, args.new, args.config, args.trust)
    except (CheckpointError, ConfigError, OSError) as e:
        print(f"convert_checkpoint: error: {e}", file=sys.stderr)
        return 2
    rec = ckpt[RECORD_KEY]
    print(
        f"converted {args.old} -> {args.new}: task {rec['task']} (robot {rec['robot']}), iteration "
        f"{ckpt['iteration']}; it loads with weights_only=True"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
