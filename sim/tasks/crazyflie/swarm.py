"""Crazyflie team in clutter (LEARN): N drones fly min-jerk go-to setpoints across a cluttered
room, sensing obstacles with ToF rows and neighbours through delayed radio broadcasts.

One world = one whole team. Actions are `motors` mode per drone, drone-major: the env's
num_actions = 4 * N, action[4 i : 4 i + 4] = normalized motor thrusts m1..m4 of drone i in [-1, 1]
(on board, the policy drives the motors, as LEARN flies it). Observations are per drone and
concatenated drone-major too: policy (W, N * D) with D = per_drone_obs_dim, so a shared-weight
per-drone policy reshapes to (W * N, D). The reward is the team mean of per-drone terms.

Per-drone observation (LEARN's firmware order): self 18 = position - setpoint (3), velocity -
setpoint velocity (3), rotation matrix row-major (9), body rates (3); neighbours 6 k = the k nearest
by broadcast position, [dp (3), dv (3)] each, from broadcasts refreshed at neighbour_rate_hz and
delivered neighbour_latency_s late; ToF 32 (4 x 8 zones, metres, clipped at 2 m) or 5 (Multi-ranger).

Scenes: sim.scenes.clutter draws a new obstacle layout per world at every reset. Layouts come from
numbered scenes: training draws indices below HELD_OUT_BASE, evaluation passes scene_set="test"
(indices HELD_OUT_BASE + k), so held-out scenes are never trained on. scenario="gap" replaces the
clutter by one wall across the room (y = 0) with a gap_width opening (0.2 m surface to surface by
default) centred on each drone's straight planner path: drones fly parallel lanes 1 m apart, each
through its own gap (sim.scenes.clutter.gap_wall). gap_fraction > 0 mixes such gap walls into the
training scenes (that fraction of training resets; held-out scenes keep their scenario).

Rewards: SwarmRewardWeights, each term logged by name (Episode/rew_<name>). Two-stage training sets
rewards.safety_guide > 0 in stage 1 (the guide term, -|a - a_cbf| against the CBF-filtered planner
command) and 0 in stage 2, which fine-tunes stage 1's checkpoint without it (scripts/swarm_comparison.py).
The CBF teachers (safe_command, sensed_safe_command) and the scene geometry are in swarm_teacher.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from robot_conventions.options import FINITE, NONNEG, NONNEG_INT, POSITIVE, PROB, Choice, Range, option
from sim.robots.goto_planner import CbfParams, MinJerkGoto, TrackingGains
from sim.scene_files import write_scene
from sim.scenes.clutter import ClutterConfig, Layout, build_mjcf, drone_names, gap_wall, sample_layouts, write_layout
from sim.sensors.tof import SENSOR_LAYOUTS, RangeSensors, quat_wxyz_to_rotmat
from sim.tasks.base import Controls, Task, TeamSpec
from sim.tasks.crazyflie.constants import DRONE_RADIUS
from sim.tasks.crazyflie.swarm_config import (
    FAR,
    HELD_OUT_BASE,
    NEIGHBOUR_HIT,
    OBS_NOISE_STD,
    OBSTACLE_HIT,
    SwarmRewardWeights,
)
from sim.tasks.crazyflie.swarm_teacher import CbfTeacher


@dataclass
class CrazyflieSwarm(CbfTeacher, Task):
    action_mode: str = "motors"  # the only mode: on board, the policy drives the motors
    num_drones: int = option(6, Range(1, 64, integer=True))
    k_neighbours: int = option(2, NONNEG_INT)
    neighbour_rate_hz: float = option(10.0, POSITIVE)  # P2P broadcasts every 100 ms on the real team
    neighbour_latency_s: float = option(0.03, NONNEG)
    tof: str = "vl53l5cx_row"  # or multiranger
    tof_rate_hz: float = option(15.0, POSITIVE)
    tof_noise_std: float = option(0.01, NONNEG)
    tof_dropout: float = option(0.02, PROB)
    tof_yaw_noise: float = option(0.0, NONNEG)
    speed_mean: float = option(0.5, POSITIVE)  # planner mean speed, N(0.5, 0.1) clipped to 0.3..0.7 as in LEARN
    speed_std: float = option(0.1, NONNEG)
    speed_range: tuple[float, float] = option((0.3, 0.7), Range(0, lo_open=True, ordered=True))
    density: float = option(0.2, PROB)
    cell_min: float = option(0.5, POSITIVE)
    cell_max: float = option(0.8, POSITIVE)
    success_radius: float = option(0.25, POSITIVE)
    success_hold_s: float = option(1.0, NONNEG)
    scene_set: str = option("train", Choice(("train", "test")))  # train | test (held out)
    # test scenes: world w of the first reset gets scene HELD_OUT_BASE + offset + w
    scene_offset: int = option(0, NONNEG_INT)
    # clutter | gap (a wall with one gap_width opening on each drone's path)
    scenario: str = option("clutter", Choice(("clutter", "gap")))
    gap_width: float = option(0.2, POSITIVE)  # m, surface to surface
    # training scenes only: this fraction of resets get the gap wall instead of clutter
    gap_fraction: float = option(0.0, PROB)
    rewards: SwarmRewardWeights = option(factory=SwarmRewardWeights, rule=FINITE)  # a dict from Hydra is accepted

    control_dt = 0.01  # 100 Hz, LEARN's training rate
    substeps = 5
    robot = "crazyflie_2_1"
    name = "crazyflie_swarm"
    integrators = []  # no integral terms: the setpoint error is observed directly

    def __post_init__(self):
        if self.action_mode != "motors":
            raise ValueError(f"crazyflie_swarm flies in motors mode only, not '{self.action_mode}'")
        if self.scenario not in ("clutter", "gap"):
            raise ValueError(f"scenario must be clutter or gap, not '{self.scenario}'")
        if not 0.0 <= self.gap_fraction <= 1.0:
            raise ValueError(f"gap_fraction is a fraction of training resets (0 to 1), not {self.gap_fraction}")
        if isinstance(self.rewards, dict):
            self.rewards = SwarmRewardWeights(**self.rewards)
        if self.rewards.safety_guide < 0:
            raise ValueError(f"rewards.safety_guide is the guide's strength (>= 0), not {self.rewards.safety_guide}")
        self.scene = ClutterConfig(
            num_drones=self.num_drones, density=self.density, cell_min=self.cell_min, cell_max=self.cell_max
        )
        self.num_actions = 4 * self.num_drones
        sensor = SENSOR_LAYOUTS[self.tof](
            rate_hz=self.tof_rate_hz,
            noise_std=self.tof_noise_std,
            dropout_prob=self.tof_dropout,
            yaw_noise_std=self.tof_yaw_noise,
        )
        self.sensor_cfg = sensor
        self.num_beams = len(sensor.yaw_deg)
        self.per_drone_obs_dim = 18 + 6 * self.k_neighbours + self.num_beams
        self.team = TeamSpec(robots=self.num_drones, per_robot_obs_dim=self.per_drone_obs_dim)
        self.action_spec = {
            "names": [f"{d}_m{j}" for d in drone_names(self.num_drones) for j in range(1, 5)],
            "offset": [0.5] * self.num_actions,
            "scale": [0.5] * self.num_actions,
            "low": [0.0] * self.num_actions,
            "high": [1.0] * self.num_actions,
        }
        self.obs_layout = self._obs_layout()
        # BatchedEnv loads task.model_path from disk: write the generated MJCF once per configuration
        self.model_path = write_scene(build_mjcf(self.scene), "crazyflie_swarm")

    def _obs_layout(self) -> list[dict]:
        """Per-drone terms, repeated for each drone (drone-major); informational until the deploy runtime
        learns per-drone layouts (see the task docstring)."""
        terms = [("position_error", 3), ("velocity_error", 3), ("rotation", 9), ("angular_velocity", 3)]
        terms += [(f"neighbour{j}_{q}", 3) for j in range(self.k_neighbours) for q in ("dp", "dv")]
        terms += [("tof", self.num_beams)]
        return [{"name": n, "dim": d, "per_drone": True, "num_drones": self.num_drones} for n, d in terms]

    # -- setup -----------------------------------------------------------------------------------
    def attach(self, backend, cfg, rng: torch.Generator) -> None:
        self.backend, self.cfg, self.rng = backend, cfg, rng
        self.device = backend.device  # every tensor of the task lives on the backend's device
        m, W, N = backend.model, backend.num_worlds, self.num_drones
        self.W = W
        names = drone_names(N)
        self.body_ids = [m.body(n).id for n in names]
        self.qadr = torch.tensor([int(m.jnt_qposadr[m.body_jntadr[b]]) for b in self.body_ids], device=self.device)
        self.vadr = torch.tensor([int(m.jnt_dofadr[m.body_jntadr[b]]) for b in self.body_ids], device=self.device)
        self.qidx = self.qadr.unsqueeze(1) + torch.arange(7, device=self.device)  # (N, 7)
        self.vidx = self.vadr.unsqueeze(1) + torch.arange(6, device=self.device)
        obstacle_bodies = [f"column{i}" for i in range(self.scene.max_columns)]
        obstacle_bodies += [f"wallseg{i}" for i in range(self.scene.max_wall_segments)]
        self.obstacle_mocap = torch.tensor(
            [int(m.body_mocapid[m.body(n).id]) for n in obstacle_bodies], device=self.device
        )
        self.mocap_pos = backend.mocap_pos
        self.mocap_quat = backend.mocap_quat
        self.nominal_mass = float(m.body_mass[self.body_ids[0]])
        self.dr = cfg.randomization != "none"
        if self.dr:
            self.body_mass = backend.expand("body_mass")
        self.mass = torch.full((W, N), self.nominal_mass, dtype=torch.float64, device=self.device)
        self.kf_scale = torch.ones(W, N, dtype=torch.float64, device=self.device)
        self.sensors = RangeSensors(
            self.sensor_cfg,
            W,
            self.body_ids,
            self.control_dt,
            rng,
            sensors_per_drone=4 if self.tof == "vl53l5cx_row" else 5,
        )
        z = lambda *s: torch.zeros(W, N, *s, dtype=torch.float64, device=self.device)  # noqa: E731
        self.layout = Layout(
            torch.zeros(W, self.scene.max_columns, 3, dtype=torch.float64, device=self.device),
            torch.zeros(W, self.scene.max_wall_segments, 5, dtype=torch.float64, device=self.device),
        )
        self.goal = z(3)
        self.planner = MinJerkGoto(z(3), z(3), torch.ones(W, N, dtype=torch.float64, device=self.device))
        self.t = torch.zeros(W, dtype=torch.float64, device=self.device)
        self.action, self.prev_action = z(4), z(4)
        self.gains = TrackingGains()
        self.cbf = CbfParams()
        # neighbour broadcasts: a ring of past (pos, vel) per drone, the last delivered snapshot
        self.lat_steps = int(round(self.neighbour_latency_s / self.control_dt))
        self.bcast_every = max(1, int(round(1.0 / (self.neighbour_rate_hz * self.control_dt))))
        self.history = torch.zeros(self.lat_steps + 1, W, N, 6, dtype=torch.float64, device=self.device)
        self.received = z(6)
        # episode statistics
        self.hold_steps = torch.zeros(W, N, dtype=torch.long, device=self.device)
        self.reached_t = torch.full((W, N), math.nan, dtype=torch.float64, device=self.device)
        self.obst_collided = torch.zeros(W, N, dtype=torch.bool, device=self.device)
        self.neigh_collided = torch.zeros(W, N, dtype=torch.bool, device=self.device)
        self.crashed = torch.zeros(W, N, dtype=torch.bool, device=self.device)
        self.in_obst_contact = torch.zeros(W, N, dtype=torch.bool, device=self.device)
        self.in_neigh_contact = torch.zeros(W, N, dtype=torch.bool, device=self.device)
        self.speed_sum = z()
        self.speed_steps = z()
        self.pos_3s_ago = torch.zeros(int(3.0 / self.control_dt), W, N, 3, dtype=torch.float64, device=self.device)
        self.step_count = torch.zeros(W, dtype=torch.long, device=self.device)
        self.last_raw: dict[str, torch.Tensor] = {}
        self.scene_counter = 0

    # -- state access ----------------------------------------------------------------------------
    @property
    def pos(self) -> torch.Tensor:
        return self.backend.qpos[:, self.qidx[:, 0:3]]

    @property
    def quat(self) -> torch.Tensor:
        return self.backend.qpos[:, self.qidx[:, 3:7]]

    @property
    def vel(self) -> torch.Tensor:
        return self.backend.qvel[:, self.vidx[:, 0:3]]

    @property
    def omega(self) -> torch.Tensor:
        return self.backend.qvel[:, self.vidx[:, 3:6]]

    # -- resets ----------------------------------------------------------------------------------
    def _scene_indices(self, k: int) -> list[int]:
        if self.scene_set == "test":
            first = HELD_OUT_BASE + self.scene_offset + self.scene_counter
            self.scene_counter += k
            return list(range(first, first + k))
        return torch.randint(0, HELD_OUT_BASE, (k,), generator=self.rng, device=self.device).tolist()

    def _strip_positions(self, k: int, y_sign: torch.Tensor, gen: np.random.Generator) -> torch.Tensor:
        """N distinct slots 0.5 m apart in the start (or goal) strip of each world, with 5 cm jitter."""
        lx, ly, sm = self.scene.room[0] / 2, self.scene.room[1] / 2, self.scene.start_margin
        xs = np.arange(-lx + 0.5, lx - 0.45, 0.5)
        ys = np.arange(ly - sm + 0.3, ly - 0.3, 0.5)
        slots = np.stack(np.meshgrid(xs, ys, indexing="ij"), -1).reshape(-1, 2)
        pick = np.stack([gen.choice(len(slots), self.num_drones, replace=False) for _ in range(k)])
        xy = torch.from_numpy(slots[pick] + gen.uniform(-0.05, 0.05, (k, self.num_drones, 2))).to(self.device)
        xy[..., 1] *= y_sign.unsqueeze(1)
        zc = self.scene.fly_height + torch.from_numpy(gen.uniform(-0.15, 0.15, (k, self.num_drones, 1))).to(self.device)
        return torch.cat([xy, zc], dim=-1)

    def _gap_scene(self, k: int, gen: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor, Layout]:
        """Scenario gap: each drone flies straight along y in its own lane (x on a 1 m grid, 5 cm jitter)
        through its own gap in a wall at y = 0; starts and goals in the two strips, same x and height."""
        lx, ly, sm = self.scene.room[0] / 2, self.scene.room[1] / 2, self.scene.start_margin
        lanes = np.arange(-lx + 1.0, lx - 0.99, 1.0)
        if self.num_drones > len(lanes):
            raise ValueError(f"scenario gap has {len(lanes)} lanes for {self.num_drones} drones")
        x = np.stack([gen.choice(lanes, self.num_drones, replace=False) for _ in range(k)])
        x = x + gen.uniform(-0.05, 0.05, x.shape)
        y = gen.uniform(ly - sm + 0.3, ly - 0.3, x.shape) * np.where(gen.random(k) < 0.5, -1.0, 1.0)[:, None]
        z = self.scene.fly_height + gen.uniform(-0.15, 0.15, x.shape)
        start = torch.from_numpy(np.stack([x, y, z], -1)).to(self.device)
        goal = torch.from_numpy(np.stack([x, -y, z], -1)).to(self.device)
        return start, goal, gap_wall(self.scene, x, self.gap_width, device=self.device)

    def reset_worlds(self, ids: torch.Tensor) -> None:
        b, k, N = self.backend, len(ids), self.num_drones
        scenes = self._scene_indices(k)
        gen = np.random.default_rng([int(s) for s in scenes] + [7])  # starts and goals follow the scene index
        if self.scenario == "gap":
            start, goal, lay = self._gap_scene(k, gen)
            self.layout.columns[ids], self.layout.walls[ids] = lay.columns, lay.walls
        else:
            for w, s in zip(ids.tolist(), scenes, strict=True):  # a reset-time loop over the reset worlds only
                lay = sample_layouts(self.scene, 1, np.random.default_rng(s), device=self.device)
                self.layout.columns[w], self.layout.walls[w] = lay.columns[0], lay.walls[0]
            y_sign = torch.from_numpy(np.where(gen.random(k) < 0.5, -1.0, 1.0)).to(self.device)
            start = self._strip_positions(k, y_sign, gen)
            goal = self._strip_positions(k, -y_sign, gen)
            if self.gap_fraction > 0 and self.scene_set == "train":  # own draws: the clutter ones stay as they were
                mix = np.random.default_rng([int(s) for s in scenes] + [11])
                gap = torch.from_numpy(mix.random(k) < self.gap_fraction).to(self.device)
                if gap.any():
                    start[gap], goal[gap], lay = self._gap_scene(int(gap.sum()), mix)
                    self.layout.columns[ids[gap]], self.layout.walls[ids[gap]] = lay.columns, lay.walls
        write_layout(
            Layout(self.layout.columns[ids], self.layout.walls[ids]),
            ids,
            self.mocap_pos,
            self.mocap_quat,
            self.scene,
            self.obstacle_mocap,
        )
        qpos = b.qpos[ids]
        qpos[:, self.qidx[:, 0:3]] = start
        qpos[:, self.qidx[:, 3:7]] = torch.tensor([1.0, 0, 0, 0], dtype=torch.float64, device=self.device)
        b.qpos[ids] = qpos
        qvel = b.qvel[ids]
        qvel[:, self.vidx] = 0.0
        b.qvel[ids] = qvel
        speed = (
            self.speed_mean
            + self.speed_std * torch.randn(k, N, generator=self.rng, dtype=torch.float64, device=self.device)
        ).clamp(*self.speed_range)
        self.goal[ids] = goal
        self.planner.replan(ids, start, goal, speed)
        if self.dr:
            mass = self.nominal_mass * (
                0.9 + 0.3 * torch.rand(k, N, generator=self.rng, dtype=torch.float64, device=self.device)
            )
            self.mass[ids] = mass
            bm = self.body_mass[ids]
            bm[:, self.body_ids] = mass
            self.body_mass[ids] = bm
            self.kf_scale[ids] = 0.85 + 0.35 * torch.rand(
                k, N, generator=self.rng, dtype=torch.float64, device=self.device
            )
            b.set_const(ids)
        self.t[ids] = 0.0
        self.step_count[ids] = 0
        self.action[ids] = 0.0
        self.prev_action[ids] = 0.0
        state = torch.cat([start, torch.zeros_like(start)], dim=-1)
        self.history[:, ids] = state
        self.received[ids] = state
        for buf in (self.hold_steps, self.speed_steps, self.speed_sum):
            buf[ids] = 0
        self.reached_t[ids] = math.nan
        for buf in (self.obst_collided, self.neigh_collided, self.crashed, self.in_obst_contact, self.in_neigh_contact):
            buf[ids] = False
        self.pos_3s_ago[:, ids] = start
        self.sensors.reset(ids)
        self._refresh(advance=False)

    # -- stepping --------------------------------------------------------------------------------
    def command(self, a: torch.Tensor) -> torch.Tensor:
        """Policy actions (W, 4 N) in [-1, 1] -> motor commands (W, N, 4) in [0, 1]."""
        return (0.5 + 0.5 * a.reshape(-1, self.num_drones, 4)).clamp(0.0, 1.0)

    def controls(self, actions: torch.Tensor) -> Controls:
        self.prev_action = self.action
        self.action = actions.to(torch.float64).reshape(-1, self.num_drones, 4)
        return self.motor_controls(self.command(actions))

    def motor_controls(self, cmd: torch.Tensor) -> Controls:
        """A control period of motor commands (W, N, 4) in [0, 1] (baselines fly these directly)."""
        return Controls(hold=(cmd * 0.15 * self.kf_scale.unsqueeze(-1)).reshape(self.W, -1))

    def after_physics(self) -> None:
        self.t += self.control_dt
        self.step_count += 1
        self._update_status()
        self._refresh(advance=True)

    def interval_events(self, step: torch.Tensor) -> None:
        pass  # no pushes: collisions with the clutter and neighbours are disturbance enough

    def _update_status(self) -> None:
        p, v = self.pos, self.vel
        d_obs, _ = self.obstacle_geometry()
        self.min_obst = d_obs.min(dim=-1).values
        d_nb, _, _ = self.neighbour_geometry()
        self.min_neigh = d_nb.min(dim=-1).values
        self.in_obst_contact = self.min_obst < OBSTACLE_HIT
        self.in_neigh_contact = self.min_neigh < NEIGHBOUR_HIT
        self.obst_collided |= self.in_obst_contact
        self.neigh_collided |= self.in_neigh_contact
        q = self.quat
        rzz = 1 - 2 * (q[..., 1] ** 2 + q[..., 2] ** 2)
        self.crashed |= (rzz < 0.0) | (p[..., 2] < 0.05) | (p[..., 2] > self.scene.height)
        err = (p - self.goal).norm(dim=-1)
        self.goal_err = err
        self.hold_steps = torch.where(err < self.success_radius, self.hold_steps + 1, 0)
        hold = int(round(self.success_hold_s / self.control_dt))
        newly = (self.hold_steps == hold) & torch.isnan(self.reached_t)
        self.reached_t = torch.where(newly, self.t.unsqueeze(1) - self.success_hold_s, self.reached_t)
        flying = torch.isnan(self.reached_t)
        self.speed_sum += v.norm(dim=-1) * flying
        self.speed_steps += flying.double()
        slot = int(self.step_count[0]) % self.pos_3s_ago.shape[0]  # ring slot (episodes may be staggered;
        self.displacement_3s = (p - self.pos_3s_ago[slot]).norm(dim=-1)  # then this is a 3 s window anyway)
        self.pos_3s_ago[slot] = p

    def _refresh(self, advance: bool) -> None:
        """Setpoint, broadcasts, ToF and the raw state the policy sees, once per control step."""
        self.sp_pos, self.sp_vel, self.sp_acc = self.planner.setpoint(self.t)
        state = torch.cat([self.pos, self.vel], dim=-1)
        if advance:
            self.history = torch.roll(self.history, 1, dims=0)
            self.history[0] = state
            due = (self.step_count % self.bcast_every) == 0
            self.received = torch.where(due.view(-1, 1, 1), self.history[self.lat_steps], self.received)
        self.tof = self.sensors.read(self.backend, self.pos, self.quat, advance=advance).clone()
        self.last_raw = {
            "position": self.pos.clone(),
            "velocity": self.vel.clone(),
            "rotation": quat_wxyz_to_rotmat(self.quat).flatten(-2),
            "angular_velocity": self.omega.clone(),
        }

    # -- observations and rewards ----------------------------------------------------------------
    def _observed_neighbours(self, own: torch.Tensor) -> torch.Tensor:
        """The k nearest neighbours' delayed broadcasts relative to own (W, N, 6): (W, N, k, 6) [dp, dv]."""
        N, k = self.num_drones, self.k_neighbours
        rel = self.received.unsqueeze(1) - own.unsqueeze(2)  # (W, i, j, 6): j's broadcast relative to i
        dist = rel[..., 0:3].norm(dim=-1) + torch.diag(torch.full((N,), math.inf, dtype=rel.dtype, device=rel.device))
        kk = min(k, N - 1)
        idx = torch.topk(dist, kk, dim=-1, largest=False).indices
        nb = torch.gather(rel, 2, idx.unsqueeze(-1).expand(*idx.shape, 6))
        if kk < k:  # pad: neighbours far away and still
            pad = torch.zeros(*nb.shape[:2], k - kk, 6, dtype=nb.dtype, device=nb.device)
            pad[..., 0:3] = FAR
            nb = torch.cat([nb, pad], 2)
        return nb

    def _per_drone_obs(self, raw: dict[str, torch.Tensor]) -> torch.Tensor:
        nb = self._observed_neighbours(torch.cat([raw["position"], raw["velocity"]], -1))
        self_terms = [
            raw["position"] - self.sp_pos,
            raw["velocity"] - self.sp_vel,
            raw["rotation"],
            raw["angular_velocity"],
        ]
        return torch.cat(self_terms + [nb.flatten(-2), self.tof], dim=-1)

    def observations(self) -> dict[str, torch.Tensor]:
        raw = dict(self.last_raw)
        if self.cfg.obs_noise:
            for key, std in OBS_NOISE_STD.items():
                raw[key] = raw[key] + std * torch.randn(
                    raw[key].shape, generator=self.rng, dtype=torch.float64, device=self.device
                )
        policy = self._per_drone_obs(raw).reshape(self.W, -1).float()
        critic = [self._per_drone_obs(self.last_raw).reshape(self.W, -1)]
        critic.append(self.min_obst_clipped().reshape(self.W, -1))  # privileged: true clearances
        return {"policy": policy, "critic": torch.cat(critic, -1).float()}

    def min_obst_clipped(self) -> torch.Tensor:
        return getattr(self, "min_obst", torch.full((self.W, self.num_drones), 2.0, device=self.device)).clamp(max=2.0)

    def reward_terms(self) -> dict[str, torch.Tensor]:
        w, p = self.rewards, self.pos
        d_sp = (p - self.sp_pos).norm(dim=-1)
        hit_n = NEIGHBOUR_HIT
        terms = {
            "setpoint": w.setpoint * torch.exp(-d_sp / 0.3),
            "goal": w.goal * torch.exp(-self.goal_err / 0.5),
            "goal_progress": w.goal_progress * (self.vel * (self.goal - p)).sum(-1) / self.goal_err.clamp(min=0.05),
            "velocity_tracking": w.velocity_tracking * ((self.vel - self.sp_vel) ** 2).sum(-1),
            "effort": w.effort * self.action.norm(dim=-1),
            "angular_velocity": w.angular_velocity * (self.omega**2).sum(-1),
            "obstacle_collision": w.obstacle_collision * self.in_obst_contact.double(),
            "obstacle_proximity": w.obstacle_proximity * ((0.5 - self.min_obst) / 0.45).clamp(0.0, 1.0),
            "neighbour_collision": w.neighbour_collision * self.in_neigh_contact.double(),
            "neighbour_proximity": w.neighbour_proximity * ((2 * hit_n - self.min_neigh) / hit_n).clamp(0.0, 1.0),
            "crash": w.crash * self.crashed.double(),
        }
        if w.safety_guide != 0.0:
            safe = 2.0 * self.safe_command() - 1.0  # policy units
            terms["safety_guide"] = -w.safety_guide * (self.action - safe).norm(dim=-1)
        self.drone_terms = terms  # each drone's own terms (W, N), for per-drone credit (robot_rl.envs.PerDroneEnv)
        return {k: v.mean(dim=1) for k, v in terms.items()}  # team mean

    def terminated(self) -> torch.Tensor:
        return self.crashed.any(dim=1)

    def drone_outcome(self) -> dict[str, torch.Tensor]:
        """Per-drone episode metrics (W, N) at the current step (call at the episode's end)."""
        collided = self.obst_collided | self.neigh_collided | self.crashed
        success = ~torch.isnan(self.reached_t) & ~collided
        stuck = (self.displacement_3s < 0.3) & (self.t >= 3.0).unsqueeze(1)  # a full 3 s window
        deadlock = ~success & ~collided & (self.goal_err > self.success_radius) & stuck
        # past the room's midline (the gap wall in scenario gap) on the goal's side, never having collided
        y, gy = self.pos[..., 1], self.goal[..., 1]
        traversed = ~collided & (y * gy.sign() > self.scene.wall_thickness / 2 + DRONE_RADIUS)
        return {
            "success": success.double(),
            "obstacle_collision": (self.obst_collided | self.crashed).double(),
            "neighbour_collision": self.neigh_collided.double(),
            "time_to_goal_s": torch.where(success, self.reached_t, math.nan),
            "mean_speed": self.speed_sum / self.speed_steps.clamp(min=1),
            "deadlock": deadlock.double(),
            "crash": self.crashed.double(),
            "traversed": traversed.double(),
            "final_goal_error_m": self.goal_err.clone(),
        }

    def episode_outcome(self, ids: torch.Tensor, time_outs: torch.Tensor) -> dict[str, torch.Tensor]:
        out = {k: v[ids] for k, v in self.drone_outcome().items()}
        self.final_drone_outcome = dict(out, position_error_m=out["final_goal_error_m"])  # (len(ids), N) each
        result = {k: v.mean(dim=1) for k, v in out.items() if k != "time_to_goal_s"}
        result["time_to_goal_s"] = torch.nan_to_num(out["time_to_goal_s"].nanmean(dim=1), nan=0.0)
        result["position_error_m"] = result["final_goal_error_m"]  # the name robot-rl eval reports
        return result

    def controller_state(self) -> list[torch.Tensor]:
        return [self.action, self.received, self.history.flatten(0, 1), self.sensors.held, self.t]
