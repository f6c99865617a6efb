"""The work behind each robot-rl command. Each cmd_* takes the command's arguments (key=value)."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import numpy as np
import torch
import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf

from robot_rl.config import ConfigError, expand_sweep, load_config, to_yaml
from robot_rl.envs import make_env
from robot_rl.schema import check_ranges
from robot_rl.sitl_flight import fly_sitl
from robot_rl.training.checkpoint import latest_checkpoint, load_checkpoint, task_config_hash, task_record
from robot_rl.training.run_dir import (
    begin_run,
    git_revision,
    new_run_name,
    now_iso,
    package_versions,
    read_meta,
    update_meta,
    write_json_atomic,
)


def _split(args: list[str], keys: tuple[str, ...]) -> tuple[dict[str, str], list[str]]:
    """Pull command-specific key=value arguments (run=, bundle=, ...) out of the Hydra overrides."""
    picked, rest = {}, []
    for a in args:
        if "=" not in a:
            raise ConfigError(f"argument '{a}' is not key=value")
        k, v = a.split("=", 1)
        (picked.__setitem__(k, v) if k in keys else rest.append(a))
    return picked, rest


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _run_config(run_dir: Path, overrides: list[str]) -> DictConfig:
    """A finished run's saved config with value overrides on top (types checked)."""
    path = run_dir / "config.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"{run_dir} is not a run directory (no config.yaml)")
    cfg = _load_run_yaml(path)
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


def _load_run_yaml(path: Path) -> DictConfig:
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


def _index(runs_root: Path, run_dir: Path) -> None:
    """Put the run into the evaluation store the dashboard reads."""
    from robot_rl.store import index_run, open_store

    store = open_store(runs_root=str(runs_root))
    try:
        index_run(store, run_dir)
    finally:
        store.close()


def _load_actor(cfg: DictConfig, run_dir: Path, checkpoint: str | None = None):
    from robot_rl.training.ppo_trainer import PPOTrainer

    env = make_env(cfg, num_worlds=1)
    trainer = PPOTrainer(env, OmegaConf.to_container(cfg.algo, resolve=True))
    trainer.load(Path(checkpoint) if checkpoint else latest_checkpoint(run_dir))
    return trainer.inference_policy(), env


# -- train --------------------------------------------------------------------------------------------
def cmd_train(args: list[str]) -> list[Path]:
    multirun = "-m" in args or "--multirun" in args
    args = [a for a in args if a not in ("-m", "--multirun")]
    sweeps = expand_sweep(args) if multirun else [args]
    for overrides in sweeps:  # validate every combination before spending time on any
        load_config(overrides)
    return [train_one(load_config(o), o) for o in sweeps]


def reward_name(cfg: DictConfig) -> str:
    if cfg.get("guidance") is not None and cfg.guidance.name == "keypoint":
        return "keypoint"
    return str((cfg.task.get("params") or {}).get("reward", "dense"))


def guidance_name(cfg: DictConfig) -> str:
    g = cfg.get("guidance")
    if g is None or g.name == "none":
        return "none"
    return f"{g.name}:{g.get('backend', g.get('planner'))}"


def attach_guidance(cfg: DictConfig, env, run_dir: Path | None) -> None:
    """Keypoint rewards (KAGI) replace the task's reward; guidance artifacts go to <run>/guidance/."""
    g = cfg.get("guidance")
    if g is None or g.name == "none":
        return
    out = run_dir / "guidance" if run_dir is not None else None
    if g.name == "keypoint":
        from robot_rl.guidance.kagi import attach_keypoint_reward, keypoint_config

        try:
            kcfg = keypoint_config(OmegaConf.to_container(g, resolve=True))
            summary = attach_keypoint_reward(env, kcfg, float(cfg.algo.gamma), out)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        print(f"keypoint guidance ({kcfg.backend}): {summary['layouts']} layouts, sources {summary['sources']}, "
              f"{summary['requests']} model requests")  # fmt: skip
    elif g.name == "plan":  # make_env wrapped the env in the plan controller
        print(f"planned exploration ({g.planner}): {len(env.plans)} layouts, sources {sorted(set(env.sources))}, "
              f"{env.requests} model requests")  # fmt: skip
        if out is not None:
            env.save_guidance(out)
    else:
        raise ConfigError(f"unknown guidance '{g.name}' (none, keypoint, plan)")


def _start_run(run_dir: Path, cfg: DictConfig, **meta) -> None:
    """Create a new run directory: its config.yaml and a meta.json marked running (meta adds fields)."""
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(to_yaml(cfg))
    begin_run(run_dir, {
        "run_name": run_dir.name, "task": cfg.task.name, "algo": cfg.algo.name, **meta,
        "seed": int(cfg.seed), "git_revision": git_revision(), "versions": package_versions(),
        "started_at": now_iso(), "status": "running",
    })  # fmt: skip


def train_one(cfg: DictConfig, overrides: list[str] = ()) -> Path:
    """overrides: the command line's, so that resume= says what it applies and what it ignores."""
    from torch.utils.tensorboard import SummaryWriter

    from robot_rl.training.ppo_trainer import PPOTrainer
    from robot_rl.training.resume import resume_config

    t_setup = time.perf_counter()
    resuming = bool(cfg.resume)
    if resuming:
        run_dir = Path(cfg.resume)
        given, cfg = cfg, _run_config(run_dir, [])
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
        _start_run(run_dir, cfg, reward=reward_name(cfg), guidance=guidance_name(cfg),
                   **({"init_from": str(checkpoint)} if checkpoint else {}))  # fmt: skip
    _seed_everything(int(cfg.seed))
    env = make_env(cfg)
    attach_guidance(cfg, env, run_dir)
    env.stagger_episodes()
    writer = SummaryWriter(log_dir=str(run_dir / "tb"), flush_secs=5)
    trainer = PPOTrainer(env, OmegaConf.to_container(cfg.algo, resolve=True), run_dir=run_dir, writer=writer,
                         config_hash=task_config_hash(cfg.task))  # fmt: skip
    if checkpoint is not None:
        trainer.load(checkpoint, fine_tune=not resuming)
        how = "resuming" if resuming else "initialised"
        print(f"{how} {run_dir} from {checkpoint} (iteration {trainer.iteration})")
    setup_s = time.perf_counter() - t_setup
    worlds = env.num_worlds  # a per-drone env has more environments than worlds
    print(f"run: {run_dir}  ({worlds} worlds, {int(cfg.train.iterations)} iterations)")
    try:
        result = trainer.learn(int(cfg.train.iterations), save_every=int(cfg.train.save_every),
                               progress=bool(cfg.train.progress))  # fmt: skip
    except BaseException:
        update_meta(run_dir, status="failed", finished_at=now_iso())
        raise
    finally:
        writer.close()
        env.save_guidance(run_dir / "guidance")  # plan, option choices, verification statistics (planned exploration)
    update_meta(run_dir, status="finished", finished_at=now_iso(), train_wall_time_s=round(result["train_time_s"], 2),
                total_steps=result["total_steps"], iterations=result["iterations"])  # fmt: skip
    print(f"training wall time: {result['train_time_s']:.1f} s for {result['total_steps']:,} env steps "
          f"(set-up {setup_s:.1f} s, not counted)")  # fmt: skip
    _index(Path(cfg.runs_root), run_dir)
    return run_dir


# -- imitate ------------------------------------------------------------------------------------------
def cmd_imitate(args: list[str]) -> Path:
    """DAgger warm start: imitation.<field>=value set robot_rl.training.imitation.DaggerConfig, the rest are
    the train command's overrides (task, algo, seed, task.num_worlds, runs_root, run_name)."""
    from dataclasses import asdict

    from robot_rl.training.imitation import dagger_config

    settings = {a.split("=", 1)[0].removeprefix("imitation."): a.split("=", 1)[1]
                for a in args if a.startswith("imitation.") and "=" in a}  # fmt: skip
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

    from robot_rl.training.imitation import run_dagger, teacher_actions, warm_up_critic
    from robot_rl.training.ppo_trainer import PPOTrainer

    name = cfg.run_name or new_run_name(cfg.task.name, f"{cfg.algo.name}_dagger", int(cfg.seed), Path(cfg.runs_root))
    run_dir = Path(cfg.runs_root) / name
    if run_dir.exists():
        raise ConfigError(f"run directory {run_dir} exists; pick another run_name")
    _seed_everything(int(cfg.seed))
    env = make_env(cfg)
    try:
        teacher_actions(env.task, dagger.teacher)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    env.stagger_episodes()  # episodes end at different times: the samples cover every phase of a flight
    trainer = PPOTrainer(env, OmegaConf.to_container(cfg.algo, resolve=True), config_hash=task_config_hash(cfg.task))
    _start_run(run_dir, cfg, kind="imitation", imitation=asdict(dagger))
    worlds = env.num_worlds
    print(f"imitate: {run_dir}  ({worlds} worlds, {dagger.rounds} DAgger rounds x {dagger.steps_per_round} "
          "env steps)")  # fmt: skip
    t0 = time.perf_counter()
    try:
        history = run_dagger(env, trainer.alg.get_policy(), dagger, seed=int(cfg.seed),
                             progress=bool(cfg.train.progress))  # fmt: skip
        critic = warm_up_critic(trainer, dagger.critic_iterations, bool(cfg.train.progress))
    except BaseException:
        update_meta(run_dir, status="failed", finished_at=now_iso())
        raise
    wall = time.perf_counter() - t0
    # a PPO run started from this checkpoint accounts for the imitation's env steps and time
    trainer.total_steps += dagger.rounds * dagger.steps_per_round * worlds
    trainer.train_time_s = wall
    trainer.save(run_dir / "checkpoints" / "model_0.pt")
    critic = {k: critic[k] for k in ("total_steps", "train_time_s", "mean_return")}
    write_json_atomic(run_dir / "imitation.json", {"config": asdict(dagger), "rounds": history,
                                                   "critic_warm_up": critic})  # fmt: skip
    update_meta(run_dir, status="finished", finished_at=now_iso(), train_wall_time_s=round(wall, 2),
                total_steps=trainer.total_steps, iterations=0)  # fmt: skip
    last = history[-1]
    print(f"imitation wall time: {wall:.1f} s for {trainer.total_steps:,} env steps; last round (beta "
          f"{last['beta']:g}): loss {last['fresh_loss']:.4f} on its fresh samples, {last['train_loss']:.4f} after "
          f"fitting; checkpoint {run_dir / 'checkpoints' / 'model_0.pt'}")  # fmt: skip
    return run_dir


# -- eval ---------------------------------------------------------------------------------------------
EVAL_POLICIES = ("trained", "zero", "corrected_plan")


def cmd_eval(args: list[str]) -> dict:
    opts, overrides = _split(args, ("run", "checkpoint", "bundle", "name", "policy"))
    if "run" not in opts:
        raise ConfigError("eval needs run=<run directory>")
    return evaluate_run(Path(opts["run"]), overrides, opts.get("checkpoint"),
                        opts.get("bundle", "false").lower() == "true", opts.get("name"),
                        opts.get("policy", "trained"))  # fmt: skip


def evaluate_run(run_dir: Path, overrides: list[str] = (), checkpoint: str | None = None, use_bundle: bool = False,
                 name: str | None = None, policy: str = "trained") -> dict:  # fmt: skip
    """Evaluate a run's policy (its checkpoint, or its exported bundle through the deploy runtime).

    policy 'trained': the run's policy. 'zero': act with zeros instead; for a plan-guided run that is the plan
    alone (k * a_rl = 0) with the plan's options as a fresh run has them. 'corrected_plan': zeros too, with
    the options as the checkpoint's online correction left them (the corrected plan without the residual).
    """
    from robot_rl.evaluation.evaluate import deploy_policy, evaluate, swarm_deploy_policy, torch_policy
    from robot_rl.training.ppo_trainer import restore_guidance

    if policy not in EVAL_POLICIES:
        raise ConfigError(f"eval policy= is 'trained' (default), 'zero' or 'corrected_plan', not '{policy}'")
    kind = policy if policy != "trained" else "bundle" if use_bundle else "checkpoint"
    cfg = _run_config(run_dir, list(overrides))
    e = cfg.eval
    env = make_env(
        cfg,
        num_worlds=int(e.episodes),
        seed=int(e.seed),
        randomization=str(e.randomization),
        obs_noise=bool(e.obs_noise),
        action_latency=bool(e.action_latency),
        pushes=bool(e.pushes),
    )
    if kind in ("zero", "corrected_plan"):
        act = lambda env: torch.zeros(env.num_envs, env.num_actions)  # noqa: E731
    elif kind == "bundle":
        from robot_rl.deploy import PolicyRuntime

        runtime = PolicyRuntime(run_dir / "bundle")
        swarm = "swarm" in runtime.bundle.extra  # one drone's policy: every drone of every world runs it
        act = swarm_deploy_policy(runtime, int(e.seed)) if swarm else deploy_policy(runtime)
    else:
        actor, _ = _load_actor(cfg, run_dir, checkpoint)
        act = torch_policy(actor)
    if env.learns_online and kind != "zero":  # the options as the checkpoint left them
        path = Path(checkpoint) if checkpoint else latest_checkpoint(run_dir)
        restore_guidance(env, load_checkpoint(path, expect=task_record(env.task)))
    t0 = time.perf_counter()
    result = evaluate(env, act, progress=True)
    name = name or f"{kind}_{e.randomization}"
    result.update(name=name, task=cfg.task.name, randomization=str(e.randomization), seed=int(e.seed),
                  policy={"zero": "zero", "corrected_plan": "zero", "bundle": "onnx", "checkpoint": "torch"}[kind],
                  wall_time_s=round(time.perf_counter() - t0, 2))  # fmt: skip
    (run_dir / "eval").mkdir(exist_ok=True)
    write_json_atomic(run_dir / "eval" / f"{name}.json", result)
    m = result["metrics"]
    lo, hi = m["success_ci95"]
    print(f"eval {name}: success {m['success_rate']:.3f} (Wilson 95% [{lo:.3f}, {hi:.3f}], lower bound {lo:.3f}) "
          f"over {result['episodes']} episodes; crash rate {m['crash_rate']:.3f}; "
          f"final position error {m['position_error_m'] * 100:.1f} cm")  # fmt: skip
    _index(Path(cfg.runs_root), run_dir)
    return result


# -- export / play ------------------------------------------------------------------------------------
def cmd_export(args: list[str]) -> Path:
    opts, overrides = _split(args, ("run", "checkpoint"))
    if "run" not in opts:
        raise ConfigError("export needs run=<run directory>")
    if overrides:  # the bundle is the trained policy as it is: nothing to override
        raise ConfigError(f"export takes run= and checkpoint=, not {overrides[0].split('=')[0]}=")
    return export_run(Path(opts["run"]), opts.get("checkpoint"))


def export_run(run_dir: Path, checkpoint: str | None = None) -> Path:
    from robot_rl.deploy import load_bundle
    from robot_rl.export.bundle_export import export_bundle

    cfg = _run_config(run_dir, [])
    if cfg.get("guidance") is not None and cfg.guidance.name == "plan":
        raise ConfigError("plan-guided policies act as residuals on the plan controller, which bundles do not carry "
                          "yet: export is not available for guidance=plan runs")  # fmt: skip
    actor, env = _load_actor(cfg, run_dir, checkpoint)
    meta = read_meta(run_dir)
    source = {"run": run_dir.name, "checkpoint": str(checkpoint or latest_checkpoint(run_dir).name),
              "git_revision": meta.get("git_revision", git_revision()), "versions": package_versions(),
              "exported_at": now_iso()}  # fmt: skip
    bundle = export_bundle(actor, env.task, run_dir / "bundle", source)
    load_bundle(bundle.path)  # what a robot will do first: refuse a bundle that does not validate
    print(f"exported {bundle.path}/policy.onnx + policy.yaml ({bundle.obs_dim} obs -> {bundle.action_dim} "
          f"{bundle.action.mode} actions at {bundle.control_rate_hz:.0f} Hz)")  # fmt: skip
    _index(Path(cfg.runs_root), run_dir)
    return bundle.path


def cmd_play(args: list[str]) -> Path:
    opts, overrides = _split(args, ("run", "checkpoint"))
    if "run" not in opts:
        raise ConfigError("play needs run=<run directory>")
    return play_run(Path(opts["run"]), overrides, opts.get("checkpoint"))


def play_run(run_dir: Path, overrides: list[str] = (), checkpoint: str | None = None) -> Path:
    from robot_rl.evaluation.evaluate import torch_policy
    from robot_rl.play.video import record

    cfg = _run_config(run_dir, list(overrides))
    actor, _ = _load_actor(cfg, run_dir, checkpoint)
    env = make_env(cfg, num_worlds=1, seed=int(cfg.eval.seed), pushes=False)
    p = cfg.play
    out = run_dir / "videos" / "play.mp4"
    camera = p.camera if p.camera is not None else env.task.default_camera
    info = record(env, torch_policy(actor), out, float(p.seconds), camera, int(p.width), int(p.height))
    print(f"video: {out} ({info['frames']} frames, final position error {info['final_position_error_m'] * 100:.1f} cm)")
    _index(Path(cfg.runs_root), run_dir)
    return out


# -- sitl ---------------------------------------------------------------------------------------------
def cmd_sitl(args: list[str]) -> dict:
    opts, rest = _split(args, ("bundle", "seconds", "ros", "out"))
    if rest:
        raise ConfigError(f"sitl takes bundle=, seconds=, ros= and out=, not {rest[0].split('=')[0]}=")
    if "bundle" not in opts:
        raise ConfigError("sitl needs bundle=<bundle directory>")
    try:
        seconds = float(opts.get("seconds", 10.0))
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds <= 3600:
        raise ConfigError(f"sitl seconds={opts['seconds']!r} is out of range: allowed a number in (0, 3600]")
    if opts.get("ros", "auto") not in ("auto", "true", "false"):
        raise ConfigError(f"sitl ros={opts['ros']!r} is not allowed: one of auto, true, false")
    return fly_sitl(Path(opts["bundle"]), seconds, opts.get("ros", "auto"),
                    Path(opts["out"]) if "out" in opts else None)  # fmt: skip


# -- demo ---------------------------------------------------------------------------------------------
def cmd_demo(args: list[str]) -> Path:
    t0 = time.perf_counter()
    cfg = load_config(args)
    run_dir = train_one(cfg)
    result = evaluate_run(run_dir)
    export_run(run_dir)
    play_run(run_dir)
    sitl = fly_sitl(run_dir / "bundle", out=run_dir / "eval" / "sitl.json")
    meta = read_meta(run_dir)
    print(json.dumps({
        "run": str(run_dir),
        "train_wall_time_s": meta.get("train_wall_time_s"),
        "success_rate": result["metrics"]["success_rate"],
        "success_wilson_lower": result["metrics"]["success_ci95"][0],
        "sitl_final_error_m": round(sitl["final_position_error_m"], 4),
        "total_demo_time_s": round(time.perf_counter() - t0, 1),
    }, indent=2))  # fmt: skip
    print(f"dashboard: robot-rl dashboard --runs-root {cfg.runs_root}  (then open http://127.0.0.1:8765)")
    return run_dir
