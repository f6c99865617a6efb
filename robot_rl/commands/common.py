"""What the commands share: option splitting, seeding, a run's config and actor, run records."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import torch
import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf

from robot_rl.config import ConfigError, to_yaml
from robot_rl.envs import make_env
from robot_rl.schema import check_ranges
from robot_rl.training.checkpoint import latest_checkpoint
from robot_rl.training.run_dir import begin_run, git_revision, now_iso, package_versions


def split_options(args: list[str], keys: tuple[str, ...]) -> tuple[dict[str, str], list[str]]:
    """Pull command-specific key=value arguments (run=, bundle=, ...) out of the Hydra overrides."""
    picked, rest = {}, []
    for a in args:
        if "=" not in a:
            raise ConfigError(f"argument '{a}' is not key=value")
        k, v = a.split("=", 1)
        (picked.__setitem__(k, v) if k in keys else rest.append(a))
    return picked, rest


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def run_config(run_dir: Path, overrides: list[str]) -> DictConfig:
    """A finished run's saved config with value overrides on top (types checked)."""
    path = run_dir / "config.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"{run_dir} is not a run directory (no config.yaml)")
    cfg = load_run_yaml(path)
    for o in overrides:
        key, value = o.split("=", 1)
        old = OmegaConf.select(cfg, key, default="__missing__")
        if old == "__missing__":
            raise ConfigError(f"unknown config key '{key}'")
        if isinstance(old, (DictConfig, ListConfig)):  # a run's task, algo, ...: the checkpoint was trained on them
            raise ConfigError(f"{key} is a group a trained run keeps; override single values (eval.episodes=256)")
        try:
            new = yaml.safe_load(value) if not isinstance(old, str) else value
        except yaml.YAMLError:
            raise ConfigError(f"{key}: cannot parse {value!r}") from None
        if (
            isinstance(old, bool)
            and not isinstance(new, bool)
            or (isinstance(old, (int, float)) and not isinstance(old, bool) and not isinstance(new, (int, float)))
        ):
            raise ConfigError(f"{key}: expected {type(old).__name__}, got {value!r}")
        OmegaConf.update(cfg, key, new)
    check_ranges(cfg)
    return cfg


def load_run_yaml(path: Path) -> DictConfig:
    """A run's config.yaml, or one line saying why it cannot be one (bad YAML, binary, not a run config)."""
    from omegaconf.errors import OmegaConfBaseException

    try:
        cfg = OmegaConf.load(path)
    except (yaml.YAMLError, UnicodeDecodeError, OmegaConfBaseException) as e:
        raise ConfigError(f"{path} is not a valid config ({' '.join(str(e).split())})") from None
    missing = [k for k in ("task", "algo", "eval") if not isinstance(cfg, DictConfig) or k not in cfg]
    if missing or not isinstance(cfg.task, DictConfig) or "name" not in cfg.task:
        raise ConfigError(f"{path} is not a robot_rl run config (no {', '.join(missing) or 'task.name'})")
    return cfg


def index_run(runs_root: Path, run_dir: Path) -> None:
    """Put the run into the evaluation store the dashboard reads."""
    from robot_rl.store import index_run, open_store

    store = open_store(runs_root=str(runs_root))
    try:
        index_run(store, run_dir)
    finally:
        store.close()


def load_actor(cfg: DictConfig, run_dir: Path, checkpoint: str | None = None):
    from robot_rl.training.learners import make_trainer, needs_final_observation

    env = make_env(cfg, num_worlds=1, final_observation=needs_final_observation(cfg.algo.name))
    trainer = make_trainer(env, OmegaConf.to_container(cfg.algo, resolve=True))
    trainer.load(Path(checkpoint) if checkpoint else latest_checkpoint(run_dir))
    return trainer.inference_policy(), env


def start_run(run_dir: Path, cfg: DictConfig, **meta) -> None:
    """Create a new run directory: its config.yaml and a meta.json marked running (meta adds fields)."""
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(to_yaml(cfg))
    begin_run(
        run_dir,
        {
            "run_name": run_dir.name,
            "task": cfg.task.name,
            "algo": cfg.algo.name,
            **meta,
            "seed": int(cfg.seed),
            "git_revision": git_revision(),
            "versions": package_versions(),
            "started_at": now_iso(),
            "status": "running",
        },
    )
