"""robot-rl play: a video of a run's policy."""

from __future__ import annotations

from pathlib import Path

from robot_rl.commands.common import index_run, load_actor, run_config, split_options
from robot_rl.config import ConfigError
from robot_rl.envs import make_env


def cmd_play(args: list[str]) -> Path:
    opts, overrides = split_options(args, ("run", "checkpoint", "episode", "evaluation"))
    if "run" not in opts:
        raise ConfigError("play needs run=<run directory>")
    if "episode" in opts:
        if "checkpoint" in opts:
            raise ConfigError("play episode= replays an evaluation with the checkpoint it recorded; drop checkpoint=")
        try:
            episode = int(opts["episode"])
        except ValueError:
            raise ConfigError(f"play episode= is an episode number, not '{opts['episode']}'") from None
        return play_episode(Path(opts["run"]), episode, opts.get("evaluation"), overrides)
    if "evaluation" in opts:
        raise ConfigError("play evaluation= names the evaluation of episode=; give episode=<number> too")
    return play_run(Path(opts["run"]), overrides, opts.get("checkpoint"))


def play_episode(run_dir: Path, episode: int, evaluation: str | None = None, overrides: list[str] = ()) -> Path:
    """Film episode `episode` of a recorded checkpoint evaluation (default: the standard one,
    checkpoint_<eval.randomization>): the evaluation's env is rebuilt with its seed and conditions, every world
    runs the checkpoint it recorded, and world `episode` is rendered until its first episode ends. Prints the
    final position error against the evaluation's record (the same number: the evaluation is deterministic)."""
    import json

    import torch

    from robot_rl.commands.evaluate import evaluation_env
    from robot_rl.evaluation.evaluate import torch_policy
    from robot_rl.play.video import write_mp4

    cfg = run_config(run_dir, list(overrides))
    name = evaluation or f"checkpoint_{cfg.eval.randomization}"
    path = run_dir / "eval" / f"{name}.json"
    if not path.is_file():
        have = sorted(p.stem for p in (run_dir / "eval").glob("*.json")) if (run_dir / "eval").is_dir() else []
        raise ConfigError(
            f"play episode=: no evaluation '{name}' in {run_dir / 'eval'} (there: {', '.join(have) or 'none'})"
        )
    try:
        record = json.loads(path.read_text())
        episodes, evaluated = record["per_episode"], record.get("checkpoint")
    except (ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"{path}: not an evaluation record ({e})") from None
    if record.get("policy") != "torch" or not evaluated:
        raise ConfigError(
            f"{path}: play episode= replays checkpoint evaluations; this one ran policy {record.get('policy')!r}"
        )
    if not 0 <= episode < len(episodes):
        raise ConfigError(f"play episode={episode}: {name} has episodes 0..{len(episodes) - 1}")
    cfg.eval.episodes, cfg.eval.seed = len(episodes), int(record["seed"])
    for key, value in record.get("conditions", {}).items():
        cfg.eval[key] = value
    cfg.eval.randomization = record["randomization"]
    actor, _ = load_actor(cfg, run_dir, str(run_dir / evaluated))
    env = evaluation_env(cfg)
    act = torch_policy(actor)
    p = cfg.play
    camera = p.camera if p.camera is not None else env.task.default_camera
    every = max(1, int(round(1.0 / (50 * env.task.control_dt))))  # about 50 frames per second
    env.reset()
    frames, final = [], None
    for k in range(env.max_episode_length):
        if k % every == 0:
            frames.append(env.backend.render(episode, camera=camera, width=int(p.width), height=int(p.height)))
        _, _, dones, extras = env.step(act(env))
        if bool(dones[episode]):
            ids = extras["final"]["ids"]
            final = float(extras["final"]["position_error_m"][torch.nonzero(ids == episode)[0, 0]])
            break
    out = run_dir / "videos" / f"{name}_episode_{episode}.mp4"
    write_mp4(frames, out, fps=int(round(1.0 / (every * env.task.control_dt))))
    rec = episodes[episode]
    print(
        f"video: {out} ({len(frames)} frames); episode {episode} of {name}: final position error "
        f"{final * 100:.2f} cm (recorded {rec['position_error_m'] * 100:.2f} cm), success recorded {rec['success']}"
    )
    return out


def play_run(run_dir: Path, overrides: list[str] = (), checkpoint: str | None = None) -> Path:
    from robot_rl.evaluation.evaluate import torch_policy
    from robot_rl.play.video import record

    cfg = run_config(run_dir, list(overrides))
    actor, _ = load_actor(cfg, run_dir, checkpoint)
    env = make_env(cfg, num_worlds=1, seed=int(cfg.eval.seed), pushes=False)
    p = cfg.play
    out = run_dir / "videos" / "play.mp4"
    camera = p.camera if p.camera is not None else env.task.default_camera
    info = record(env, torch_policy(actor), out, float(p.seconds), camera, int(p.width), int(p.height))
    print(f"video: {out} ({info['frames']} frames, final position error {info['final_position_error_m'] * 100:.1f} cm)")
    index_run(Path(cfg.runs_root), run_dir)
    return out
