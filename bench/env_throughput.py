"""Env throughput of crazyflie_hover, side by side with raw mujoco.batch and a Gymnasium loop.

Prints, from one run and one process:
  - batched env steps/s at 1024 worlds, with and without policy inference, with the firmware as a native
    MuJoCo callback (the default, firmware_impl=native) and, on a second line, in torch between substeps,
  - raw mujoco.batch control steps/s of the same model and substeps: the fastest raw stepping, one
    batch.step(nstep=substeps) call per control period with the controls held, of the plain model
    (assets/crazyflie/crazyflie.xml, without the native firmware's userdata) from the env's start states,
  - the same raw stepping of the lean model the hover task steps (sim/tasks/crazyflie/lean_model.py: same
    dynamics, less work), with its ratio to the plain model's,
  - the ratio env / raw (goal >= 0.8), env and raw timed in alternating blocks so load changes cancel,
  - the speedup over robot_rl/CrazyflieHover-v0 in a plain Gymnasium loop and in SyncVectorEnv;
  - with --tasks, the same env / raw ratio for other tasks (arm, quadruped, swarm), each against raw
    mujoco.batch stepping of its own model from the env's own start states, one call per control
    period with the controls held, as for hover.

    python bench/env_throughput.py [--worlds 1024] [--steps 200] [--tasks arm_reach,arm_push,quadruped_velocity]
"""

from __future__ import annotations

import argparse
import os
import time

import mujoco
import mujoco.batch
import numpy as np
import torch

os.environ.setdefault("MUJOCO_GL", "egl")


def time_it(fn, steps: int) -> float:
    fn()  # warm up
    t0 = time.perf_counter()
    for _ in range(steps):
        fn()
    return time.perf_counter() - t0


def time_alternating(*fns, steps: int, blocks: int = 10) -> list[float]:
    """Seconds for `steps` calls of each function, timed in alternating blocks, so a change of machine load
    during the run weighs on both sides of a ratio alike (timing one after the other moved it by 0.3)."""
    for fn in fns:  # warm up
        fn()
    total = [0.0] * len(fns)
    per = max(1, steps // blocks)
    for _ in range(blocks):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            for _ in range(per):
                fn()
            total[i] += time.perf_counter() - t0
    scale = steps / (per * blocks)
    return [t * scale for t in total]


def raw_stepper(model_path, env, substeps: int, ctrl: float | None = None):
    """The fastest raw stepping of a plain model: one batch.step(nstep=substeps) call per control period, controls
    held, started from the env's own start states (and its controls, or `ctrl` in every actuator)."""
    batch = mujoco.batch.Batch(mujoco.MjModel.from_xml_path(str(model_path)), env.num_envs, nthread=0)
    for f in ("qpos", "qvel", "ctrl"):
        batch.bind(f)[:] = getattr(env.backend, f).numpy() if f != "ctrl" or ctrl is None else ctrl
    batch.forward()
    return lambda: batch.step(nstep=substeps)


def task_ratio(spec: str, n: int, steps: int) -> tuple[float, float]:
    """(env steps/s with zero actions, raw mujoco.batch control steps/s) for one task, same process.

    spec: a task name, optionally with parameters, e.g. quadruped_velocity:terrain=rough."""
    import yaml

    from sim.env import BatchedEnv, EnvConfig
    from sim.tasks import make_task

    name, *params = spec.split(":")
    kwargs = {k: yaml.safe_load(v) for k, v in (x.split("=", 1) for x in params)}
    env = BatchedEnv(make_task(name, **kwargs), EnvConfig(num_worlds=n, nthread=0, pushes=False))
    zeros = torch.zeros(n, env.num_actions, dtype=torch.float64)
    raw_step = raw_stepper(env.task.model_path, env, env.task.substeps)
    t_env, t_raw = time_alternating(lambda: env.step(zeros), raw_step, steps=steps)
    env.close()
    return n * steps / t_env, n * steps / t_raw


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worlds", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--gym-steps", type=int, default=2000)
    ap.add_argument(
        "--tasks",
        default="",
        help="comma-separated further tasks to compare with raw stepping "
        "(name or name:param=value:..., e.g. quadruped_velocity:terrain=rough)",
    )
    args = ap.parse_args()
    torch.set_num_threads(1)
    n, steps = args.worlds, args.steps

    from sim.env import BatchedEnv, EnvConfig
    from sim.tasks import make_task
    from sim.tasks.crazyflie import MODEL_PATH
    from sim.tasks.crazyflie.lean_model import lean_model_path

    task = make_task("crazyflie_hover")  # firmware_impl=native
    env = BatchedEnv(task, EnvConfig(num_worlds=n, nthread=0))
    if not task.native:
        print("note: the native firmware is unavailable here (see the log); both env lines run torch")
    env_torch = BatchedEnv(make_task("crazyflie_hover", firmware_impl="torch"), EnvConfig(num_worlds=n, nthread=0))
    zeros = torch.zeros(n, 4, dtype=torch.float64)

    # policy inference: the default actor size, normalizer included, on a third env (native firmware)
    from robot_rl.training.ppo_trainer import PPOTrainer

    env_pol = BatchedEnv(make_task("crazyflie_hover"), EnvConfig(num_worlds=n, nthread=0))
    algo = dict(num_steps_per_env=24, num_learning_epochs=5, num_mini_batches=4, learning_rate=1e-3, gamma=0.99,
                lam=0.95, entropy_coef=0.0, desired_kl=0.01, schedule="adaptive", clip_param=0.2, max_grad_norm=1.0,
                actor_hidden_dims=[64, 64], critic_hidden_dims=[128, 128], activation="elu", init_std=0.3)  # fmt: skip
    actor = PPOTrainer(env_pol, algo).inference_policy()
    obs = {"o": env_pol.get_observations()}

    def step_with_policy():
        with torch.inference_mode():
            a = actor(obs["o"])
        obs["o"] = env_pol.step(a)[0]

    # raw mujoco.batch: the plain model, same 5 substeps per control step, controls held, nothing else;
    # started from the env's own start states (a quarter rest on the floor, with contacts)
    raw_step = raw_stepper(MODEL_PATH, env, task.substeps, ctrl=0.066)  # about hover thrust per motor
    raw_lean = raw_stepper(lean_model_path(MODEL_PATH), env, task.substeps, ctrl=0.066)
    # the envs fresh from the same start states (same seed), all five timed in the same alternating blocks
    t_env, t_env_torch, t_env_pol, t_raw, t_lean = time_alternating(
        lambda: env.step(zeros), lambda: env_torch.step(zeros), step_with_policy, raw_step, raw_lean, steps=steps
    )

    # Gymnasium: one world per env, plain loop and SyncVectorEnv of 16
    import gymnasium as gym

    import robot_rl.gym_envs  # noqa: F401  (registers robot_rl/CrazyflieHover-v0)

    single = gym.make("robot_rl/CrazyflieHover-v0")
    single.reset(seed=0)
    a1 = np.zeros(4, dtype=np.float32)
    t_gym = time_it(lambda: single.step(a1), args.gym_steps)
    vec = gym.vector.SyncVectorEnv([lambda: gym.make("robot_rl/CrazyflieHover-v0") for _ in range(16)])
    vec.reset(seed=0)
    a16 = np.zeros((16, 4), dtype=np.float32)
    t_vec = time_it(lambda: vec.step(a16), args.gym_steps // 16)

    sps_env = n * steps / t_env
    sps_torch = n * steps / t_env_torch
    sps_pol = n * steps / t_env_pol
    sps_raw = n * steps / t_raw
    sps_lean = n * steps / t_lean
    sps_gym = args.gym_steps / t_gym
    sps_vec = 16 * (args.gym_steps // 16) / t_vec
    dt_ms = env.backend.model.opt.timestep * 1e3
    print(f"crazyflie_hover, {n} worlds, {task.substeps} substeps of {dt_ms:.0f} ms per step, {os.cpu_count()} cores")
    print(f"{'':38s}{'env steps/s':>14s}{'ratio':>10s}")
    print(f"{'raw mujoco.batch (reference)':38s}{sps_raw:14,.0f}{1.0:10.2f}")
    print(f"{'raw mujoco.batch, lean model':38s}{sps_lean:14,.0f}{sps_lean / sps_raw:10.2f}   (the env steps it)")
    print(f"{'BatchedEnv, no policy (native fw)':38s}{sps_env:14,.0f}{sps_env / sps_raw:10.2f}   (goal >= 0.8)")
    print(f"{'BatchedEnv, no policy (torch fw)':38s}{sps_torch:14,.0f}{sps_torch / sps_raw:10.2f}")
    print(f"{'BatchedEnv + policy inference':38s}{sps_pol:14,.0f}{sps_pol / sps_raw:10.2f}")
    print(f"{'CrazyflieHover-v0, Gymnasium loop':38s}{sps_gym:14,.0f}{sps_gym / sps_raw:10.2f}")
    print(f"{'CrazyflieHover-v0, SyncVectorEnv(16)':38s}{sps_vec:14,.0f}{sps_vec / sps_raw:10.2f}")
    print(f"env / raw of the lean model it steps: native fw {sps_env / sps_lean:.2f}, "
          f"torch fw {sps_torch / sps_lean:.2f}")  # fmt: skip
    print(f"speedup of BatchedEnv over the Gymnasium loop: {sps_env / sps_gym:.1f}x, over SyncVectorEnv: "
          f"{sps_env / sps_vec:.1f}x (goal >= 5x)")  # fmt: skip
    for name in filter(None, args.tasks.split(",")):
        env_sps, raw_sps = task_ratio(name, n, steps)
        print(f"{name:34s} env {env_sps:12,.0f}  raw {raw_sps:12,.0f}  env/raw {env_sps / raw_sps:5.2f}  (goal >= 0.8)")


if __name__ == "__main__":
    main()
