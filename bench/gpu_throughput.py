"""Env throughput on MuJoCo Warp (backend=mjwarp), side by side with raw MJWarp stepping of the same model.

Prints, per task and world count, from one run and one process:
  - env control steps/s of the BatchedEnv on backend=mjwarp (zero actions),
  - raw MJWarp control steps/s: mjw.step `substeps` times per control period on the env backend's own Model and
    Data (controls held, nothing else), captured as one warp graph and replayed as the backend replays its own,
    timed in alternating blocks with the env so load changes cancel,
  - their ratio (issue 19's goal on a GPU: >= 0.7),
  - the training loop's env steps/s (PPO iterations: rollout and update, as robot-rl train runs them),
  - the one-off set-up apart: building the env, the first step (kernel compile and load on first use) and the
    graph capture of the second;
and camera observations (`--camera-worlds`): arm_pick_place with an RGB camera, env steps/s on `mujoco` (MuJoCo's
renderer, one world at a time) and on `mjwarp` (MJWarp's batch renderer, every world in one call), and frames/s
of the render alone, the two backends timed in alternating blocks.

`--device cuda` runs it on a GPU (the env, its task and PPO there too: backend.device); the default is warp's CPU
device. `--smoke` is the small configuration CI runs (tests/bench/test_gpu_throughput.py).

    python bench/gpu_throughput.py [--device cuda] [--worlds 4096,16384] [--tasks crazyflie_hover,quadruped_velocity]
    python bench/gpu_throughput.py --smoke
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from env_throughput import time_alternating  # bench/ is the script's directory

os.environ.setdefault("MUJOCO_GL", "egl")


def measure(task: str, worlds: int, steps: int, iterations: int, device: str = "cpu") -> dict[str, float]:
    from robot_rl.config import load_config
    from robot_rl.envs import make_env
    from robot_rl.training.learners import make_trainer

    overrides = [f"task={task}", "backend=mjwarp", f"backend.device={device}", f"task.num_worlds={worlds}",
                 "algo.num_steps_per_env=8"]  # fmt: skip
    cfg = load_config(overrides)
    t0 = time.perf_counter()
    env = make_env(cfg)
    setup_s = time.perf_counter() - t0
    backend = env.backend
    zeros = torch.zeros(env.num_envs, env.num_actions, dtype=torch.float64, device=env.device)
    t0 = time.perf_counter()
    env.step(zeros)
    first_step_s = time.perf_counter() - t0
    env.step(zeros)  # the second step of a kind captures its graph (backend.capture_s)
    capture_s = sum(backend.capture_s.values())

    def raw() -> None:  # the backend's own substep graph with controls held: one control period, no mirrors
        with backend._warp_scope():
            backend._run_substeps(env.task.substeps, scheduled=False)
        backend._wp.synchronize_device(backend.wp_device)  # as the env step, which reads results on the host, waits

    raw(), raw()  # compiled, then captured: out of the timed blocks

    t_env, t_raw = time_alternating(lambda: env.step(zeros), raw, steps=steps, blocks=min(10, steps))
    trainer = make_trainer(env, dict(cfg.algo))
    result = trainer.learn(iterations, save_every=10**9, progress=False)
    env.close()
    return {
        "env": worlds * steps / t_env,
        "raw": worlds * steps / t_raw,
        "train": result["total_steps"] / result["train_time_s"],
        "setup_s": setup_s,
        "first_step_s": first_step_s,
        "capture_s": capture_s,
    }


def measure_camera(worlds: int, steps: int, size: int = 48) -> dict[str, float]:
    """Env steps/s and frames/s of arm_pick_place's front RGB camera on both backends, in alternating blocks."""
    from sim.env import BatchedEnv, EnvConfig
    from sim.tasks import make_task

    task = {"camera_obs": "front", "camera_kind": "rgb", "camera_size": size}
    envs = [BatchedEnv(make_task("arm_pick_place", **task), EnvConfig(num_worlds=worlds, backend=b, nthread=1))
            for b in ("mujoco", "mjwarp")]  # fmt: skip
    zeros = torch.zeros(worlds, envs[0].num_actions, dtype=torch.float64)
    for env in envs:
        env.reset()
    stepped = time_alternating(*(lambda e=e: e.step(zeros) for e in envs), steps=steps, blocks=min(5, steps))
    rendered = time_alternating(
        *(lambda e=e: e.backend.render_all("front", size, size, "rgb") for e in envs), steps=steps, blocks=min(5, steps)
    )
    for env in envs:
        env.close()
    return {
        "mujoco_env": worlds * steps / stepped[0],
        "mjwarp_env": worlds * steps / stepped[1],
        "mujoco_frames": worlds * steps / rendered[0],
        "mjwarp_frames": worlds * steps / rendered[1],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu", help="backend.device: cpu (warp's CPU device), cuda or cuda:<n>")
    ap.add_argument("--worlds", default="4096,16384")
    ap.add_argument("--tasks", default="crazyflie_hover,quadruped_velocity,arm_reach")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--camera-worlds", default="16", help="worlds of the camera comparison ('' : none)")
    ap.add_argument("--camera-steps", type=int, default=20)
    ap.add_argument("--smoke", action="store_true", help="16 worlds, 4 steps, 1 iteration of crazyflie_hover")
    args = ap.parse_args()
    if args.smoke:
        args.worlds, args.tasks, args.steps, args.iterations = "16", "crazyflie_hover", 4, 1
        args.camera_worlds, args.camera_steps = "4", 2
    torch.set_num_threads(1)
    import warp as wp

    wp.config.quiet = True
    where = wp.get_device(args.device)
    print(f"backend=mjwarp on warp device {where} (the env, its task and PPO there too), {os.cpu_count()} cores")
    head = f"{'task':22s}{'worlds':>8s}{'env steps/s':>14s}{'raw steps/s':>14s}{'env/raw':>9s}{'train steps/s':>15s}"
    print(f"{head}{'set-up s':>10s}{'1st step s':>11s}{'capture s':>11s}")
    for task in filter(None, args.tasks.split(",")):
        for worlds in (int(w) for w in args.worlds.split(",")):
            r = measure(task, worlds, args.steps, args.iterations, args.device)
            print(
                f"{task:22s}{worlds:8d}{r['env']:14,.0f}{r['raw']:14,.0f}{r['env'] / r['raw']:9.2f}"
                f"{r['train']:15,.0f}{r['setup_s']:10.1f}{r['first_step_s']:11.2f}{r['capture_s']:11.3f}"
            )
    if args.camera_worlds:
        print("\ncamera observations, arm_pick_place front RGB 48x48 (mujoco: one world at a time; mjwarp: one call)")
        head = f"{'worlds':>6s}{'mujoco env/s':>14s}{'mjwarp env/s':>14s}{'ratio':>7s}"
        print(f"{head}{'mujoco fps':>12s}{'mjwarp fps':>12s}")
        for worlds in (int(w) for w in args.camera_worlds.split(",")):
            c = measure_camera(worlds, args.camera_steps)
            print(
                f"{worlds:6d}{c['mujoco_env']:14,.0f}{c['mjwarp_env']:14,.0f}{c['mjwarp_env'] / c['mujoco_env']:7.2f}"
                f"{c['mujoco_frames']:12,.0f}{c['mjwarp_frames']:12,.0f}"
            )


if __name__ == "__main__":
    main()
