"""Classical planners for the Crazyflie team in clutter, and the metrics every method is scored by.

All three fly the task's min-jerk go-to setpoints with the same geometric controller
(sim.robots.goto_planner.accel_to_motors), in `motors` mode, so they differ only in how they avoid:
- `goto`: none, the plain planner (what the learned policy must beat);
- `apf`: artificial potential fields, repulsion 1/d - 1/d0 from obstacles and neighbours added to the
  tracking acceleration (attraction toward the setpoint clipped, so a far setpoint does not crush it);
- `cbf`: the tracking acceleration filtered by second-order control barrier functions (the same
  filter the task's stage-1 safety guide uses).
The classical planners see the true obstacle geometry within their sensing range and the true
neighbour states (privileged, unlike the policy's ToF rows and delayed broadcasts), which makes them
strong references rather than equal-information competitors.

Metrics per drone (then averaged): success (within 0.25 m of the goal for 1 s, no collision),
obstacle and neighbour collision rates, time to goal (successful drones), mean speed until the goal
is reached, deadlock (no collision, not at the goal, moved < 0.3 m in the last 3 s), traversed (past
the room's midline, the gap wall in scenario gap, without a collision).

Tuning: `python -m robot_rl.baselines.swarm_planners tune` sweeps the apf and cbf gains on TRAINING
scenes and writes the choice (by success rate) to configs/baselines/swarm_planners.yaml, with the
command and budget in its header; tuned_planners() reads it back.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import yaml

from sim.backends import load_model, make_backend
from sim.env import EnvConfig, step_control_period
from sim.robots.goto_planner import CbfParams, TrackingGains, accel_to_motors, cbf_filter, tracking_acceleration
from sim.sensors.tof import quat_wxyz_to_rotmat
from sim.tasks.crazyflie import CrazyflieSwarm


def _attraction(task: CrazyflieSwarm, g: TrackingGains, max_err: float = 1.0) -> torch.Tensor:
    err = task.sp_pos - task.pos
    n = err.norm(dim=-1, keepdim=True)
    err = err * (max_err / n.clamp(min=max_err))  # clip the position error's length
    return task.sp_acc + g.kp * err + g.kd * (task.sp_vel - task.vel)


@dataclass
class GotoPlanner:
    gains: TrackingGains = field(default_factory=TrackingGains)
    name = "goto"

    def acceleration(self, task: CrazyflieSwarm) -> torch.Tensor:
        return tracking_acceleration(task.pos, task.vel, task.sp_pos, task.sp_vel, task.sp_acc, self.gains)

    def __call__(self, task: CrazyflieSwarm) -> torch.Tensor:
        rot = quat_wxyz_to_rotmat(task.quat)
        return accel_to_motors(self.acceleration(task), rot, task.omega, task.mass, self.gains, task.kf_scale)


@dataclass
class PotentialFieldPlanner(GotoPlanner):
    k_obstacle: float = 0.3  # m^3/s^2 ... repulsion gain, obstacles
    k_neighbour: float = 0.3
    influence: float = 0.6  # m, obstacle surface distance where repulsion starts
    neighbour_influence: float = 0.6  # m, centre distance
    name = "apf"

    @staticmethod
    def _repulsion(d: torch.Tensor, n: torch.Tensor, k: float, d0: float) -> torch.Tensor:
        d = d.clamp(min=0.02)
        mag = torch.where(d < d0, k * (1 / d - 1 / d0) / d**2, 0.0).clamp(max=20.0)
        return (mag.unsqueeze(-1) * n).sum(2)

    def acceleration(self, task: CrazyflieSwarm) -> torch.Tensor:
        acc = _attraction(task, self.gains)
        d_obs, n_obs = task.obstacle_geometry()
        d_nb, n_nb, _ = task.neighbour_geometry()
        acc[..., 0:2] += self._repulsion(d_obs, n_obs, self.k_obstacle, self.influence)
        acc += self._repulsion(d_nb, n_nb, self.k_neighbour, self.neighbour_influence)
        return acc


@dataclass
class CbfPlanner(GotoPlanner):
    cbf: CbfParams = field(default_factory=CbfParams)
    name = "cbf"

    def acceleration(self, task: CrazyflieSwarm) -> torch.Tensor:
        acc = _attraction(task, self.gains)
        d_obs, n_obs = task.obstacle_geometry()
        d_nb, n_nb, dv = task.neighbour_geometry()
        dist = torch.cat([d_obs - self.cbf.safe_distance, d_nb - self.cbf.neighbour_distance], -1)
        normal = torch.cat([n_obs, n_nb[..., 0:2]], 2)
        rel_v = torch.cat([task.vel[..., 0:2].unsqueeze(2).expand(*n_obs.shape), dv[..., 0:2]], 2)
        acc[..., 0:2] = cbf_filter(acc[..., 0:2], dist, normal, rel_v, self.cbf, self.gains.max_acc)
        return acc


PLANNERS = {"goto": GotoPlanner, "apf": PotentialFieldPlanner, "cbf": CbfPlanner}


def make_task_env(
    num_worlds: int, seed: int, nthread: int = 1, randomization: str = "none", obs_noise: bool = False, **task_kw
) -> CrazyflieSwarm:
    """A swarm task attached to a mujoco backend without the RL env wrapper (planners need no resets mid-run).

    randomization "train" draws each drone's mass and motor constant as in training; obs_noise adds the
    training observation noise to task.observations() (what a policy sees; the planners read true state).
    """
    task = CrazyflieSwarm(**task_kw)
    cfg = EnvConfig(num_worlds=num_worlds, seed=seed, nthread=nthread, randomization=randomization, obs_noise=obs_noise)
    backend = make_backend("mujoco", load_model(task.model_path), num_worlds, nthread=nthread)
    task.attach(backend, cfg, torch.Generator().manual_seed(seed))
    ids = torch.arange(num_worlds)
    backend.reset(ids)
    task.reset_worlds(ids)
    backend.forward(ids)
    return task


def policy_controller(policy):
    """A per-drone swarm policy (observations (W, N * D) -> actions (W, N * 4) in [-1, 1], e.g. a
    SwarmAttentionPolicy) as an evaluate() controller: it sees task.observations()["policy"], as in training."""

    def act(task: CrazyflieSwarm) -> torch.Tensor:
        with torch.inference_mode():
            actions = policy(task.observations()["policy"]).clamp(-1.0, 1.0)
        return task.command(actions.double())

    return act


def evaluate(
    controller,
    num_scenes: int,
    episode_s: float = 20.0,
    seed: int = 0,
    scene_set: str = "test",
    scene_offset: int = 0,
    nthread: int = 1,
    randomization: str = "none",
    obs_noise: bool = False,
    **task_kw,
) -> dict[str, float]:
    """Fly `controller(task) -> motor commands (W, N, 4)` on num_scenes scenes at once, one episode each.

    Returns metrics averaged over all drones of all scenes (time to goal over successful drones), and under
    "per_scene" the number of drones per scene that succeeded and that collided.
    """
    task = make_task_env(
        num_scenes, seed, nthread, randomization, obs_noise, scene_set=scene_set, scene_offset=scene_offset, **task_kw
    )
    steps = int(round(episode_s / task.control_dt))
    t0 = time.perf_counter()
    for _ in range(steps):
        step_control_period(task, task.motor_controls(controller(task)))
    wall = time.perf_counter() - t0
    out = task.drone_outcome()
    ttg = out["time_to_goal_s"]
    result = {k: float(v.mean()) for k, v in out.items() if k != "time_to_goal_s"}
    result["time_to_goal_s"] = float(ttg.nanmean()) if (~torch.isnan(ttg)).any() else math.nan
    collided = (out["obstacle_collision"] + out["neighbour_collision"]) > 0
    result["collision"] = float(collided.double().mean())
    # drones per scene with each outcome: two policies flown on the same scenes compare scene by scene
    result["per_scene"] = {
        "success": out["success"].sum(dim=1).int().tolist(),
        "collision": collided.sum(dim=1).tolist(),
    }
    result["drone_steps_per_s"] = steps * num_scenes * task.num_drones / wall
    task.backend.close()
    return result


METRIC_COLUMNS = [
    "success",
    "collision",
    "obstacle_collision",
    "neighbour_collision",
    "time_to_goal_s",
    "mean_speed",
    "deadlock",
]


def format_table(rows: dict[str, dict[str, float]]) -> str:
    head = f"{'method':<10}" + "".join(f"{c:>20}" for c in METRIC_COLUMNS)
    lines = [head]
    for name, r in rows.items():
        lines.append(f"{name:<10}" + "".join(f"{r[c]:>20.3f}" for c in METRIC_COLUMNS))
    return "\n".join(lines)


# -- tuning --------------------------------------------------------------------------------------------
TUNED_PATH = Path(__file__).resolve().parents[2] / "configs" / "baselines" / "swarm_planners.yaml"
# The main gains: apf's repulsion gain and range (shared by obstacles and neighbours); cbf's safety
# distance to obstacles and its class-K gains (k0 = k1).
SWEEP = {
    "apf": {"k_obstacle": [0.1, 0.3, 1.0], "influence": [0.4, 0.6, 0.9]},
    "cbf": {"safe_distance": [0.09, 0.12, 0.18], "k": [2.0, 4.0, 8.0]},
}


def make_planner(name: str, params: dict | None = None) -> GotoPlanner:
    """A planner from its name and swept parameters (the SWEEP keys)."""
    p = dict(params or {})
    if name == "apf":
        k, d0 = p.get("k_obstacle", 0.3), p.get("influence", 0.6)
        return PotentialFieldPlanner(k_obstacle=k, k_neighbour=k, influence=d0, neighbour_influence=d0)
    if name == "cbf":
        k = p.get("k", CbfParams.k0)
        return CbfPlanner(cbf=CbfParams(safe_distance=p.get("safe_distance", CbfParams.safe_distance), k0=k, k1=k))
    if name == "goto" and not p:
        return GotoPlanner()
    raise ValueError(f"unknown planner {name!r} or parameters {p}")


def tuned_planners(path: Path = TUNED_PATH) -> dict[str, GotoPlanner]:
    """goto plus apf and cbf with the gains chosen by the sweep (defaults where no tuned file exists)."""
    tuned = yaml.safe_load(Path(path).read_text()) if Path(path).exists() else {}
    return {name: make_planner(name, tuned.get(name, {}).get("params")) for name in ("goto", "apf", "cbf")}


def tune(scenes: int, episode_s: float, seed: int, out: Path, command: str, **task_kw) -> dict:
    """Grid-sweep SWEEP on training scenes (scene_set train, DR on as in training); choose by success rate,
    then fewer collisions. Writes `out` (YAML with the command and budget in its header)."""
    t0 = time.perf_counter()
    result = {}
    for name, grid in SWEEP.items():
        rows = []
        for values in itertools.product(*grid.values()):
            params = dict(zip(grid, values, strict=True))
            r = evaluate(
                make_planner(name, params), scenes, episode_s, seed, scene_set="train", randomization="train", **task_kw
            )
            rows.append({"params": params, **{k: round(r[k], 4) for k in ("success", "collision", "deadlock")}})
            print(f"{name} {params}: success {r['success']:.3f} collision {r['collision']:.3f}", flush=True)
        best = max(rows, key=lambda row: (row["success"], -row["collision"]))
        result[name] = {
            "params": dict(best["params"]),
            "success": best["success"],  # a copy: no YAML alias
            "collision": best["collision"],
            "sweep": rows,
        }
    minutes = (time.perf_counter() - t0) / 60
    n = sum(len(list(itertools.product(*g.values()))) for g in SWEEP.values())
    header = (
        "# Classical planners for crazyflie_swarm (issue 8), tuned on TRAINING scenes; chosen by success rate\n"
        "# (ties: fewer collisions). Written by:\n"
        f"#   {command}\n"
        f"# Budget: {n} settings x {scenes} training scenes (scene_set train, seed {seed}) x "
        f"{task_kw.get('num_drones', 6)} drones x {episode_s:g} s, DR on; {minutes:.1f} min of CPU here.\n"
        "# Read by robot_rl.baselines.swarm_planners.tuned_planners() (scripts/swarm_comparison.py).\n"
    )
    body = {
        "task": "crazyflie_swarm",
        "scene_set": "train",
        "scenes": scenes,
        "episode_s": episode_s,
        "seed": seed,
        "selected_by": "success",
        **result,
    }
    Path(out).write_text(header + yaml.safe_dump(body, sort_keys=False))
    return body


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Tune the swarm planners: python -m robot_rl.baselines.swarm_planners tune")
    p.add_argument("command", choices=["tune"])
    p.add_argument("--scenes", type=int, default=16)
    p.add_argument("--episode-s", type=float, default=20.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--drones", type=int, default=6)
    p.add_argument("--out", type=Path, default=TUNED_PATH)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    command = "python -m robot_rl.baselines.swarm_planners " + " ".join(argv if argv is not None else sys.argv[1:])
    body = tune(args.scenes, args.episode_s, args.seed, args.out, command, num_drones=args.drones)
    for name in SWEEP:
        print(f"{name}: {body[name]['params']} (success {body[name]['success']:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
