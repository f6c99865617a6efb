"""Render one world to a browser-playable H.264 mp4 (libx264, yuv420p, faststart)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

os.environ.setdefault("MUJOCO_GL", "egl")


def write_mp4(frames: list[np.ndarray], path: Path, fps: int) -> Path:
    import imageio_ffmpeg

    path.parent.mkdir(parents=True, exist_ok=True)
    h, w = frames[0].shape[:2]
    tmp = path.with_suffix(".tmp.mp4")
    writer = imageio_ffmpeg.write_frames(
        str(tmp),
        (w, h),
        fps=fps,
        codec="libx264",
        pix_fmt_out="yuv420p",
        output_params=["-movflags", "+faststart", "-crf", "23"],
        macro_block_size=16,
    )
    writer.send(None)
    for f in frames:
        writer.send(np.ascontiguousarray(f))
    writer.close()
    tmp.replace(path)
    return path


def position_error(task) -> float:
    """World 0's distance to its goal as the task reports it at an episode's end (an arm's object or TCP,
    a drone's or a legged robot's position error): every task's episode_outcome has position_error_m."""
    world0, no_time_out = torch.zeros(1, dtype=torch.long), torch.zeros(task.backend.num_worlds, dtype=torch.bool)
    return float(task.episode_outcome(world0, no_time_out)["position_error_m"][0])


def record(env, policy, path: Path, seconds: float, camera: str, width: int, height: int, fps: int = 50) -> dict:
    """Run the policy in world 0 of env and film it; returns a small summary of the flight."""
    env.reset()
    steps = int(seconds / env.task.control_dt)
    every = max(1, int(round(1.0 / (fps * env.task.control_dt))))
    frames = []
    errors = []
    for k in range(steps):
        if k % every == 0:
            frames.append(env.backend.render(0, camera=camera, width=width, height=height))
        errors.append(position_error(env.task))  # before the step: a time-out resets the world
        _, _, dones, _ = env.step(policy(env))
        if bool(dones[0]):
            break
    write_mp4(frames, path, fps=int(round(1.0 / (every * env.task.control_dt))))
    return {"frames": len(frames), "final_position_error_m": errors[-1], "path": str(path)}
