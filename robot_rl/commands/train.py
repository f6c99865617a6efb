"""robot-rl train: one run per override set (a multirun sweeps them), with optional guidance."""

from __future__ import annotations

import time
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from robot_rl.commands.common import index_run, run_config, seed_everything, start_run
from robot_rl.config import ConfigError, expand_sweep, load_config
from robot_rl.envs import make_env
from robot_rl.store.run_status import true_status
from robot_rl.training.checkpoint import latest_checkpoint, task_config_hash
from robot_rl.training.run_dir import new_run_name, now_iso, read_meta, update_meta, write_json_atomic


def cmd_train(args: list[str]) -> list[Path]:
    multirun = "-m" in args or "--multirun" in args
    args = [a for a in args if a not in ("-m", "--multirun")]
    sweeps = expand_sweep(args) if multirun else [args]
    for overrides in sweeps:  # validate every combination before spending time on any
        load_config(overrides)
    return [train_one(load_config(o), o) for o in sweeps]


def _dagger_warm_start(trainer, cfg: DictConfig, run_dir: Path) -> None:
    """train.warm_start=dagger: the actor imitates the task's teacher first; its checkpoint is model_0.pt (a
    run killed later resumes from there without imitating again) and its record imitation.json."""
    from robot_rl.training.imitation import dagger_warm_start, summary_line, teacher_actions
    from robot_rl.training.imitation_config import DaggerConfig

    if cfg.algo.name not in ("ppo", "ppo_swarm"):
        raise ConfigError(f"train.warm_start=dagger warm-starts PPO's actor; algo={cfg.algo.name} has none")
    dagger = DaggerConfig(**OmegaConf.to_container(cfg.imitation, resolve=True))
    try:
        teacher_actions(trainer.env.task, dagger.teacher)
    except ValueError as e:
        raise ConfigError(f"train.warm_start=dagger: {e}") from None
    print(f"warm start: {dagger.rounds} DAgger rounds x {dagger.steps_per_round} env steps from the task's teacher")
    record = dagger_warm_start(trainer, dagger, int(cfg.seed), bool(cfg.train.progress))
    trainer.save(run_dir / "checkpoints" / "model_0.pt")
    write_json_atomic(run_dir / "imitation.json", record)
    print(summary_line(record, trainer.total_steps))


def reward_name(cfg: DictConfig) -> str:
    if cfg.get("guidance") is not None and cfg.guidance.name == "keypoint":
        return "keypoint"
    return str((cfg.task.get("params") or {}).get("reward", "dense"))


def guidance_name(cfg: DictConfig) -> str:
    g = cfg.get("guidance")
    if g is None or g.name == "none":
        return "none"
    return f"{g.name}:{g.get('backend', g.get('planner'))}"


def used_guidance(name: str, backend: str, sources: list[str]) -> str:
    """The guidance a run used, as recorded: 'keypoint:vlm', or 'keypoint:vlm->oracle (3/16 layouts)' when
    layouts fell back to the oracle because the model gave no valid answer (a cache hit is the model's)."""
    fell_back = sum(s == "oracle" for s in sources) if backend in ("vlm", "llm") else 0
    label = f"{name}:{backend}"
    return f"{label}->oracle ({fell_back}/{len(sources)} layouts)" if fell_back else label


def _warn_fallback(label: str) -> None:
    if "->oracle" in label:  # one line, whatever the number of layouts and attempts
        print(f"robot-rl: warning: guidance {label}: the model gave no valid answer for those (run's guidance/)")


def attach_guidance(cfg: DictConfig, env, run_dir: Path | None) -> str:
    """Keypoint rewards (KAGI) replace the task's reward; guidance artifacts go to <run>/guidance/. Returns the
    guidance used (used_guidance)."""
    g = cfg.get("guidance")
    if g is None or g.name == "none":
        return "none"
    out = run_dir / "guidance" if run_dir is not None else None
    if g.name == "keypoint":
        from robot_rl.guidance.kagi import attach_keypoint_reward, keypoint_config

        try:
            kcfg = keypoint_config(OmegaConf.to_container(g, resolve=True))
            summary = attach_keypoint_reward(env, kcfg, float(cfg.algo.gamma), out)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        print(
            f"keypoint guidance ({kcfg.backend}): {summary['layouts']} layouts, sources {summary['sources']}, "
            f"{summary['requests']} model requests"
        )
        sources = [source for source, n in summary["sources"].items() for _ in range(n)]
        label = used_guidance("keypoint", kcfg.backend, sources)
    elif g.name == "plan":  # make_env wrapped the env in the plan controller
        print(
            f"planned exploration ({g.planner}): {len(env.plans)} layouts, sources {sorted(set(env.sources))}, "
            f"{env.requests} model requests"
        )
        if out is not None:
            env.save_guidance(out)
        label = used_guidance("plan", str(g.planner), list(env.sources))
    else:
        raise ConfigError(f"unknown guidance '{g.name}' (none, keypoint, plan)")
    _warn_fallback(label)
    return label


def train_one(cfg: DictConfig, overrides: list[str] = ()) -> Path:
    """overrides: the command line's, so that resume= says what it applies and what it ignores."""
    from robot_rl.training.learners import check_algo, make_trainer, needs_final_observation
    from robot_rl.training.resume import resume_config
    from robot_rl.training.scalar_log import open_scalar_log

    check_algo(OmegaConf.to_container(cfg.algo, resolve=True))
    t_setup = time.perf_counter()
    resuming = bool(cfg.resume)
    if resuming:
        run_dir = Path(cfg.resume)
        status = true_status(read_meta(run_dir))
        if status == "finished" and not cfg.resume_finished:
            raise ConfigError(
                f"{run_dir} is finished; resume_finished=true trains it further, to train.iterations in total"
            )
        given, cfg = cfg, run_config(run_dir, [])
        checkpoint = latest_checkpoint(run_dir)
        # refuses an edited task config; train.iterations / save_every / progress apply, other overrides do not
        for line in resume_config(cfg, given, list(overrides), checkpoint, run_dir / "config.yaml"):
            print(line)
    else:
        name = cfg.run_name or new_run_name(cfg.task.name, cfg.algo.name, int(cfg.seed), Path(cfg.runs_root))
        run_dir = Path(cfg.runs_root) / name
        if run_dir.exists():
            raise ConfigError(f"run directory {run_dir} exists; pick another run_name or resume={run_dir}")
        checkpoint = None
        if cfg.get("init_from"):  # fine-tune: start from another run's checkpoint (a file, or a run's latest)
            checkpoint = Path(cfg.init_from)
            checkpoint = latest_checkpoint(checkpoint) if checkpoint.is_dir() else checkpoint
            if not checkpoint.is_file():
                raise ConfigError(f"init_from: no checkpoint at {checkpoint}")
        start_run(
            run_dir,
            cfg,
            reward=reward_name(cfg),
            guidance=guidance_name(cfg),
            **({"init_from": str(checkpoint)} if checkpoint else {}),
        )
    seed_everything(int(cfg.seed))
    env = make_env(cfg, final_observation=needs_final_observation(cfg.algo.name))
    used = attach_guidance(cfg, env, run_dir)
    if used != read_meta(run_dir).get("guidance"):  # what was used, not what was asked for
        update_meta(run_dir, guidance=used)
    env.stagger_episodes()
    writer = open_scalar_log(run_dir, str(cfg.logger), OmegaConf.to_container(cfg, resolve=True))
    trainer = make_trainer(
        env,
        OmegaConf.to_container(cfg.algo, resolve=True),
        run_dir=run_dir,
        writer=writer,
        config_hash=task_config_hash(cfg.task),
    )
    if checkpoint is not None:
        trainer.load(checkpoint, fine_tune=not resuming)
        if resuming:
            print(f"resuming {run_dir} from {checkpoint} (iteration {trainer.iteration})")
        else:  # a new run counts its own iterations (its env steps go on from the checkpoint's)
            print(f"initialised {run_dir} from {checkpoint} (its iteration {trainer.iteration})")
            trainer.iteration = 0
    setup_s = time.perf_counter() - t_setup
    worlds = env.num_worlds  # a per-drone env has more environments than worlds
    warm = cfg.train.warm_start == "dagger" and checkpoint is None  # a resumed run was warm-started already
    if int(cfg.train.iterations) == 0 and not (warm or resuming):
        raise ConfigError("train.iterations=0 trains nothing; it is allowed only with train.warm_start=dagger")
    print(f"run: {run_dir}  ({worlds} worlds, {int(cfg.train.iterations)} iterations)")
    try:
        if warm:
            _dagger_warm_start(trainer, cfg, run_dir)
        result = trainer.learn(
            int(cfg.train.iterations), save_every=int(cfg.train.save_every), progress=bool(cfg.train.progress)
        )
    except BaseException as e:
        status = "interrupted" if isinstance(e, KeyboardInterrupt) else "failed"
        update_meta(run_dir, status=status, finished_at=now_iso(), error=" ".join(str(e).split()) or type(e).__name__)
        raise
    finally:
        writer.close()
        env.save_guidance(run_dir / "guidance")  # plan, option choices, verification statistics (planned exploration)
    update_meta(
        run_dir,
        status="finished",
        finished_at=now_iso(),
        train_wall_time_s=round(result["train_time_s"], 2),
        total_steps=result["total_steps"],
        iterations=result["iterations"],
    )
    print(
        f"training wall time: {result['train_time_s']:.1f} s for {result['total_steps']:,} env steps "
        f"(set-up {setup_s:.1f} s, not counted)"
    )
    index_run(Path(cfg.runs_root), run_dir)
    return run_dir
