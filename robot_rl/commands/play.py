"""robot-rl play: a video of a run's policy."""

from __future__ import annotations

from pathlib import Path

from robot_rl.commands.common import index_run, load_actor, run_config, split_options
from robot_rl.config import ConfigError
from robot_rl.envs import make_env


def cmd_play(args: list[str]) -> Path:
    opts, overrides = split_options(args, ("run", "checkpoint"))
    if "run" not in opts:
        raise ConfigError("play needs run=<run directory>")
    return play_run(Path(opts["run"]), overrides, opts.get("checkpoint"))


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
