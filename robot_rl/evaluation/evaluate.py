"""Roll out a policy for exactly one episode in each of N worlds with fixed seeds, and summarize."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from tqdm import tqdm

from robot_rl.evaluation.stats import wilson_interval

# A policy maps the env (after reset/step) to actions in policy space, (n, num_actions).
Policy = Callable[[object], torch.Tensor]


def torch_policy(actor) -> Policy:
    """Deterministic actor from rsl_rl (normalizer + MLP, mean action), fed on its own device."""
    device = next(actor.parameters()).device

    def act(env) -> torch.Tensor:
        with torch.inference_mode():
            return actor(env.get_observations().to(device))

    return act


def deploy_policy(runtime) -> Policy:
    """Actions computed by the deploy runtime from the raw state the task reported (numpy + ONNX).

    The env takes policy-space actions, so its own action pipeline runs on them (the Crazyflie's
    rpyt mapping, an arm's IK and servo targets); the runtime's arm IK is held to the simulator's
    joint targets step by step in tests/robot_rl/deploy/test_arm_ik.py.
    """

    def act(env) -> torch.Tensor:
        raw = {k: v.cpu().numpy() for k, v in env.task.last_raw.items()}
        info = episode_info(env) if runtime.plan is not None else {}  # only a plan's executor starts episodes
        return torch.from_numpy(runtime.policy_actions(raw, **info))

    return act


def episode_info(env) -> dict[str, np.ndarray]:
    """Which worlds begin an episode now and which layout each is in: what a plan-guided bundle's executor needs
    to start each world's plan (the bundle carries one plan per layout of the run's pool)."""
    start = (env.episode_length_buf == 0).cpu().numpy()
    layouts = env.task.layout_id.cpu().numpy() if env.task.pool is not None else None  # a task with a layout pool
    return {"episode_start": start, "plan_index": layouts}


def swarm_deploy_policy(runtime, seed: int = 0) -> Policy:
    """A swarm bundle (one drone's policy) flying every drone of every world through the deploy runtime,
    batched: each drone's raw state as its nodes have it (own odometry, the planner's setpoint, its ToF
    zones, the other drones' delayed broadcasts). With the env's observation noise on, position, velocity
    and angular velocity get the task's noise; the attitude arrives as a quaternion and stays exact."""
    from robot_conventions.frames import quat_wxyz_to_xyzw
    from sim.tasks.crazyflie.swarm_config import OBS_NOISE_STD

    rng = np.random.default_rng(seed)
    others: dict[int, np.ndarray] = {}  # team size -> (N, N - 1): the drones each drone hears

    def act(env) -> torch.Tensor:
        t = env.task
        W, N = t.W, t.num_drones
        if N not in others:
            others[N] = np.array([[j for j in range(N) if j != i] for i in range(N)], dtype=np.int64).reshape(N, N - 1)
        raw = {
            "position": t.pos.cpu().numpy(),
            "velocity": t.vel.cpu().numpy(),
            "angular_velocity": t.omega.cpu().numpy(),
            "quaternion": quat_wxyz_to_xyzw(t.quat.cpu().numpy()),
            "setpoint_position": t.sp_pos.cpu().numpy(),
            "setpoint_velocity": t.sp_vel.cpu().numpy(),
            "tof": t.tof.cpu().numpy(),
            "neighbour_states": t.received.cpu().numpy()[:, others[N]],  # (W, N, N - 1, 6): drone i hears every j != i
        }
        if t.cfg.obs_noise:
            for key in ("position", "velocity", "angular_velocity"):
                raw[key] = raw[key] + OBS_NOISE_STD[key] * rng.standard_normal(raw[key].shape)
        a = np.clip(runtime.policy(runtime.observation(raw).reshape(W * N, -1)), -1.0, 1.0)
        return torch.from_numpy(a.astype(np.float64).reshape(W, -1))

    return act


OUTCOME_KEYS = ("ids", "terms", "success", "crash", "position_error_m")
TRACED_EPISODES = 4  # episodes 0..3 record their path (Task.trace_position) for the dashboard's trajectory plots


def evaluate(env, policy: Policy, progress: bool = True, record_obs: int = 0) -> dict:
    """Run until every world has finished its first episode. Returns summary + per-episode records.

    record_obs > 0 keeps that many policy observations (from world 0..k) for export parity checks.
    """
    n, dev = env.num_envs, env.device  # the records stay on the env's device until the summary
    env.reset()
    done = torch.zeros(n, dtype=torch.bool, device=dev)
    success = torch.zeros(n, dtype=torch.bool, device=dev)
    crashed = torch.zeros(n, dtype=torch.bool, device=dev)
    pos_err = torch.zeros(n, dtype=torch.float64, device=dev)
    returns = torch.zeros(n, dtype=torch.float64, device=dev)
    term_sums: dict[str, torch.Tensor] = {}
    extra: dict[str, torch.Tensor] = {}  # further per-episode outcomes of the task (tracking errors, levels)
    recorded = []
    traced = min(TRACED_EPISODES, n)
    first_trace = env.task.trace_position()
    traces: list[list[list[float]]] | None = None
    if first_trace is not None and tuple(first_trace.shape) == (n, 3):
        traces = [[] for _ in range(traced)]
    bar = tqdm(range(env.max_episode_length), desc="eval", disable=not progress, unit="step", leave=False)
    for _ in bar:
        if traces is not None and not bool(done[:traced].all()):  # the traced episodes are over: stop reading
            pos = env.task.trace_position()[:traced].tolist()
            for i in range(traced):
                if not done[i]:
                    traces[i].append([round(v, 4) for v in pos[i]])
        actions = policy(env)
        if record_obs:
            recorded.append(env.get_observations()["policy"][:record_obs].clone())
        _, reward, dones, extras = env.step(actions)
        returns += reward.to(dev, torch.float64) * (~done)
        if "final" in extras:
            ids = extras["final"]["ids"]
            first = ids[~done[ids]]  # only each world's first episode counts
            sel = ~done[ids]
            success[first] = extras["final"]["success"][sel] > 0
            crashed[first] = extras["final"]["crash"][sel] > 0
            pos_err[first] = extras["final"]["position_error_m"][sel]
            for k, v in extras["final"].items():
                if k not in OUTCOME_KEYS and isinstance(v, torch.Tensor) and v.shape == ids.shape:
                    extra.setdefault(k, torch.zeros(n, dtype=torch.float64, device=dev))[first] = v[sel].double()
            for k, v in extras["final"]["terms"].items():
                term_sums.setdefault(k, torch.zeros(n, dtype=torch.float64, device=dev))[first] = v[sel]
            done[first] = True
        if bool(done.all()):
            break
    success, crashed, pos_err, returns = success.cpu(), crashed.cpu(), pos_err.cpu(), returns.cpu()
    extra = {k: v.cpu() for k, v in extra.items()}
    term_sums = {k: v.cpu() for k, v in term_sums.items()}
    k = int(success.sum())
    lo, hi = wilson_interval(k, n)
    ok = ~crashed
    summary = {
        "episodes": n,
        "metrics": {
            "success_rate": k / n,
            "success_ci95": [lo, hi],
            "crash_rate": float(crashed.double().mean()),
            "position_error_m": float(pos_err[ok].mean()) if ok.any() else float("nan"),
            "position_error_median_m": float(pos_err[ok].median()) if ok.any() else float("nan"),
            "mean_return": float(returns.mean()),
            **{f"mean_{k}": float(v.mean()) for k, v in extra.items()},
        },
        "reward_terms": {name: float(v.mean()) for name, v in term_sums.items()},
        "per_episode": [
            {
                "episode": i,
                "success": bool(success[i]),
                "crashed": bool(crashed[i]),
                "position_error_m": float(pos_err[i]),
                "return": float(returns[i]),
            }
            for i in range(n)
        ],
    }
    if traces is not None:  # where the first episodes went: positions at each control step, from the start
        for i, path in enumerate(traces):
            summary["per_episode"][i].update(trace_position_m=path, trace_dt_s=float(env.task.control_dt))
    if record_obs:
        summary["recorded_obs"] = torch.cat(recorded).cpu().numpy()
    return summary


def pipe_policy(proc) -> Policy:
    """Actions from a `python -m robot_rl.deploy.pipe_server` subprocess (e.g. in a base-install venv)."""
    from robot_rl.deploy.pipe_server import read_frame, write_frame

    def act(env) -> torch.Tensor:
        info = {k: v for k, v in episode_info(env).items() if v is not None}
        write_frame(proc.stdin, {**{k: v.cpu().numpy() for k, v in env.task.last_raw.items()}, **info})
        reply = read_frame(proc.stdout)
        if reply is None or "error" in reply:
            raise RuntimeError(f"deploy runtime failed: {None if reply is None else reply['error']}")
        return torch.from_numpy(reply["policy_action"])

    return act
