"""robot-rl imitate: a DAgger warm start of the actor from the task's teacher, as a run PPO can start from."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from robot_rl.commands.common import seed_everything, start_run
from robot_rl.config import ConfigError, load_config
from robot_rl.envs import make_env
from robot_rl.schema import check_ranges
from robot_rl.training.checkpoint import task_config_hash
from robot_rl.training.run_dir import (
    new_run_name,
    now_iso,
    update_meta,
    write_json_atomic,
)


def cmd_imitate(args: list[str]) -> Path:
    """DAgger warm start: imitation.<field>=value set robot_rl.training.imitation.DaggerConfig, the rest are
    the train command's overrides (task, algo, seed, task.num_worlds, runs_root, run_name)."""
    from dataclasses import asdict

    from robot_rl.training.imitation import dagger_config

    settings = {
        a.split("=", 1)[0].removeprefix("imitation."): a.split("=", 1)[1]
        for a in args
        if a.startswith("imitation.") and "=" in a
    }
    try:
        dagger = dagger_config(settings)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    check_ranges({"imitation": asdict(dagger)})
    return imitate_one(load_config([a for a in args if not a.startswith("imitation.")]), dagger)


def imitate_one(cfg: DictConfig, dagger) -> Path:
    """A run directory (config.yaml, meta.json, imitation.json) whose checkpoints/model_0.pt is the DAgger
    student in the PPO trainer's own checkpoint format: `robot-rl train init_from=<it>` starts PPO from it."""
    from dataclasses import asdict

    from robot_rl.training.imitation import dagger_warm_start, summary_line, teacher_actions
    from robot_rl.training.ppo_trainer import PPOTrainer

    name = cfg.run_name or new_run_name(cfg.task.name, f"{cfg.algo.name}_dagger", int(cfg.seed), Path(cfg.runs_root))
    run_dir = Path(cfg.runs_root) / name
    if run_dir.exists():
        raise ConfigError(f"run directory {run_dir} exists; pick another run_name")
    seed_everything(int(cfg.seed))
    env = make_env(cfg)
    try:
        teacher_actions(env.task, dagger.teacher)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    env.stagger_episodes()  # episodes end at different times: the samples cover every phase of a flight
    trainer = PPOTrainer(env, OmegaConf.to_container(cfg.algo, resolve=True), config_hash=task_config_hash(cfg.task))
    cfg.imitation = OmegaConf.structured(dagger)  # config.yaml says what ran
    start_run(run_dir, cfg, kind="imitation", imitation=asdict(dagger))
    worlds = env.num_worlds
    print(f"imitate: {run_dir}  ({worlds} worlds, {dagger.rounds} DAgger rounds x {dagger.steps_per_round} env steps)")
    try:
        record = dagger_warm_start(trainer, dagger, int(cfg.seed), bool(cfg.train.progress))
    except BaseException:
        update_meta(run_dir, status="failed", finished_at=now_iso())
        raise
    trainer.save(run_dir / "checkpoints" / "model_0.pt")
    write_json_atomic(run_dir / "imitation.json", record)
    update_meta(
        run_dir,
        status="finished",
        finished_at=now_iso(),
        train_wall_time_s=record["wall_s"],
        total_steps=trainer.total_steps,
        iterations=0,
    )
    print(f"{summary_line(record, trainer.total_steps)}; checkpoint {run_dir / 'checkpoints' / 'model_0.pt'}")
    return run_dir
