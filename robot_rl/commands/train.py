"""robot-rl train: one run per override set (a multirun sweeps them), with optional guidance."""

from __future__ import annotations

import time
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from robot_rl.commands.common import index_run, run_config, seed_everything, start_run
from robot_rl.commands.sweep import is_hydra_override, job_config, launcher_name, run_sweep
from robot_rl.config import ConfigError, expand_sweep, load_config
from robot_rl.envs import make_env
from robot_rl.store.run_status import true_status
from robot_rl.training.checkpoint import latest_checkpoint, task_config_hash
from robot_rl.training.run_dir import new_run_name, now_iso, read_meta, update_meta, write_json_atomic


def cmd_train(args: list[str]) -> list[Path]:
    multirun = "-m" in args or "--multirun" in args
    args = [a for a in args if a not in ("-m", "--multirun")]
    if multirun and launcher_name(args) is not None:  # the sweep goes to a Hydra launcher
        return run_sweep(args, train_job)
    for a in filter(is_hydra_override, args):
        raise ConfigError(f"{a}: Hydra's settings apply to a launched sweep (-m ... hydra/launcher=<name>)")
    sweeps = expand_sweep(args) if multirun else [args]
    for overrides in sweeps:  # validate every combination before spending time on any
        load_config(overrides)
    return [train_one(load_config(o), o) for o in sweeps]


def train_job(cfg: DictConfig) -> str:
    """One job of a sweep that a Hydra launcher runs (robot_rl.commands.sweep): the run it trained."""
    ours, overrides = job_config()
    return str(train_one(ours, overrides))


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


def torchrun_ranks(cfg: DictConfig):
    """This process's ranks when torchrun started it (distributed.Ranks() otherwise), refusing what a run across
    ranks does not do yet, before any process group or run directory exists."""
    from robot_rl.training.distributed import ranks_from_env

    try:
        ranks = ranks_from_env()
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if ranks.distributed:
        refused = {"train.warm_start=dagger": cfg.train.warm_start == "dagger"}
        for what, asked in refused.items():
            if asked:
                raise ConfigError(f"{what} is not available in a torchrun run (WORLD_SIZE={ranks.world_size}) yet")
    return ranks


def init_checkpoint(cfg: DictConfig) -> Path | None:
    """init_from= (a fine-tune starts from another run's checkpoint: a file, or a run's latest), None without it."""
    if not cfg.get("init_from"):
        return None
    checkpoint = Path(cfg.init_from)
    checkpoint = latest_checkpoint(checkpoint) if checkpoint.is_dir() else checkpoint
    if not checkpoint.is_file():
        raise ConfigError(f"init_from: no checkpoint at {checkpoint}")
    return checkpoint


def _check_resume_ranks(cfg: DictConfig, checkpoint: Path, ranks) -> None:
    """A run resumes on as many ranks as it was trained on (each rank continues its own RNG streams and, off-policy,
    its own replay ring)."""
    from robot_rl.training.checkpoint import load_checkpoint
    from robot_rl.training.distributed import saved_ranks

    trained_on = saved_ranks(load_checkpoint(checkpoint))
    if trained_on != ranks.world_size:
        how = f"with torchrun --nproc_per_node {trained_on}" if trained_on > 1 else "in one process"
        raise ConfigError(
            f"{checkpoint} was trained on {trained_on} rank(s), this run has {ranks.world_size}: resume it {how}"
        )


def train_one(cfg: DictConfig, overrides: list[str] = ()) -> Path:
    """overrides: the command line's, so that resume= says what it applies and what it ignores. Under torchrun
    (WORLD_SIZE > 1) every rank trains one PPO run together (robot_rl.training.distributed); rank 0 writes it."""
    from robot_rl.training import distributed
    from robot_rl.training.learners import check_algo

    check_algo(OmegaConf.to_container(cfg.algo, resolve=True))
    ranks = torchrun_ranks(cfg)
    distributed.start(ranks, distributed.rank_device(str(cfg.backend.device), ranks))
    try:
        return _train_one(cfg, list(overrides), ranks)
    finally:
        distributed.stop()


def _train_one(cfg: DictConfig, overrides: list[str], ranks) -> Path:
    from robot_rl.training import distributed
    from robot_rl.training.learners import OFF_POLICY, make_trainer, needs_final_observation
    from robot_rl.training.resume import resume_config
    from robot_rl.training.scalar_log import open_scalar_log

    main = ranks.is_main
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
        _check_resume_ranks(cfg, checkpoint, ranks)
        # refuses an edited task config; train.iterations / save_every / progress apply, other overrides do not
        for line in resume_config(cfg, given, list(overrides), checkpoint, run_dir / "config.yaml"):
            if main:
                print(line)
    elif not main:  # rank 0 names and writes the run directory; every rank loads init_from's weights
        run_dir, checkpoint = Path(distributed.share_from_main(None)), init_checkpoint(cfg)
    else:
        name = cfg.run_name or new_run_name(cfg.task.name, cfg.algo.name, int(cfg.seed), Path(cfg.runs_root))
        run_dir = Path(cfg.runs_root) / name
        if run_dir.exists():
            raise ConfigError(f"run directory {run_dir} exists; pick another run_name or resume={run_dir}")
        checkpoint = init_checkpoint(cfg)
        start_run(
            run_dir,
            cfg,
            reward=reward_name(cfg),
            guidance=guidance_name(cfg),
            **({"init_from": str(checkpoint)} if checkpoint else {}),
            **({"ranks": ranks.world_size} if ranks.distributed else {}),
        )
        if ranks.distributed:
            distributed.share_from_main(str(run_dir))
    seed = int(cfg.seed) + ranks.rank  # each rank its own worlds and noise; the networks come from rank 0
    seed_everything(seed)
    # each rank's own GPU (the saved config keeps `cuda`); the env, its task and the learner follow it
    cfg.backend.device = distributed.rank_device(str(cfg.backend.device), ranks)
    env = make_env(cfg, seed=seed, final_observation=needs_final_observation(cfg.algo.name))
    used = attach_guidance(cfg, env, run_dir if main else None)
    if main and used != read_meta(run_dir).get("guidance"):  # what was used, not what was asked for
        update_meta(run_dir, guidance=used)
    env.stagger_episodes()
    writer = open_scalar_log(run_dir, str(cfg.logger), OmegaConf.to_container(cfg, resolve=True)) if main else None
    trainer = make_trainer(
        env,
        OmegaConf.to_container(cfg.algo, resolve=True),
        run_dir=run_dir if main or cfg.algo.name in OFF_POLICY else None,  # off-policy: every rank saves its ring
        writer=writer,
        config_hash=task_config_hash(cfg.task),
        ranks=ranks,
    )
    if checkpoint is not None:
        trainer.load(checkpoint, fine_tune=not resuming)
        if ranks.distributed and not resuming:  # a fine-tune: every rank its own streams, not the checkpoint's
            seed_everything(seed)
            env.rng.manual_seed(seed)
        if resuming and main:
            print(f"resuming {run_dir} from {checkpoint} (iteration {trainer.iteration})")
        elif not resuming:  # a new run counts its own iterations (its env steps go on from the checkpoint's)
            if main:
                print(f"initialised {run_dir} from {checkpoint} (its iteration {trainer.iteration})")
            trainer.iteration = 0
    setup_s = time.perf_counter() - t_setup
    worlds = env.num_worlds  # a per-drone env has more environments than worlds
    warm = cfg.train.warm_start == "dagger" and checkpoint is None  # a resumed run was warm-started already
    if int(cfg.train.iterations) == 0 and not (warm or resuming):
        raise ConfigError("train.iterations=0 trains nothing; it is allowed only with train.warm_start=dagger")
    if main:
        per_rank = f" per rank, {ranks.world_size} ranks" if ranks.distributed else ""
        print(f"run: {run_dir}  ({worlds} worlds{per_rank}, {int(cfg.train.iterations)} iterations)")
    try:
        if warm:
            _dagger_warm_start(trainer, cfg, run_dir)
        result = trainer.learn(
            int(cfg.train.iterations),
            save_every=int(cfg.train.save_every),
            progress=bool(cfg.train.progress) and main,
        )
    except BaseException as e:
        status = "interrupted" if isinstance(e, KeyboardInterrupt) else "failed"
        if main:
            error = " ".join(str(e).split()) or type(e).__name__
            update_meta(run_dir, status=status, finished_at=now_iso(), error=error)
        raise
    finally:
        if main:
            writer.close()
            env.save_guidance(run_dir / "guidance")  # plan, option choices, verification statistics (planned expl.)
    if not main:
        return run_dir
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
