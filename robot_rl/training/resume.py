"""resume=<run>: continue a run on the config it was trained with, and say what becomes of each override."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from robot_rl.training.checkpoint import check_same_config, load_checkpoint

# what a resumed run takes from the command line: how long it goes on, how often it saves, whether it shows progress
APPLIED = ("train.iterations", "train.save_every", "train.progress")


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def _shown(value) -> str:
    if isinstance(value, DictConfig):  # a config group: its name says which one
        return str(value.get("name", "a group"))
    return "unset" if value is None else str(value)


def resume_config(
    run_cfg: DictConfig, given: DictConfig, overrides: list[str], checkpoint: Path, config_path: Path
) -> list[str]:
    """Refuse a run whose config.yaml task section is not the one its checkpoint was trained with; apply the
    train.* overrides a resumed run takes (run_cfg is changed in place); one line per other override, ignored.

    given: the config composed from the command line (its values for the applied keys). train.iterations
    never goes below what the run's config.yaml asks for.
    """
    check_same_config(load_checkpoint(checkpoint), checkpoint, run_cfg.task, config_path)
    run_iterations = int(run_cfg.train.iterations)
    run_cfg.train.iterations = max(int(given.train.iterations), run_iterations)
    lines = []
    for o in overrides:
        key = _key(o)
        if key in ("resume", "resume_finished") or o in ("-m", "--multirun"):
            continue
        if key == "train.iterations" and int(given.train.iterations) < run_iterations:
            lines.append(f"resume: ignoring {o}: the run's config.yaml asks for {run_iterations} iterations")
        elif key in APPLIED:
            if key != "train.iterations":  # iterations was set above
                OmegaConf.update(run_cfg, key, OmegaConf.select(given, key))
            lines.append(f"resume: applying {key}={OmegaConf.select(run_cfg, key)}")
        else:
            run_value = _shown(OmegaConf.select(run_cfg, key, default=None))
            lines.append(
                f"resume: ignoring {o}: a resumed run keeps its config.yaml ({key}={run_value}); "
                "init_from= starts a new run from it with new settings"
            )
    return lines
