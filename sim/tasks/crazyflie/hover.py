"""Crazyflie hover: fly to a point and hold it, in rpyt (default), ctbr or motors mode (goto.py: moving goals).

rpyt actions go through the firmware model (sim.robots.crazyflie_firmware) at 500 Hz, so the
policy's command means what cflib's send_setpoint means on a real drone. On the CPU mujoco backend the
firmware runs by default as a native MuJoCo control callback (sim.robots.crazyflie_firmware_native): the
same arithmetic inside the batch's step; firmware_impl="torch" runs it in torch between substeps.
Observations follow OBS_LAYOUT, which is exported into the policy bundle; the deploy runtime rebuilds
them from raw robot state.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace
from typing import ClassVar

import torch

from robot_conventions.options import FINITE, NONNEG, NONNEG_INT, POSITIVE, PROB, Choice, Range, option
from sim.observation_layout import build_observation, store_raw_rows
from sim.robots import crazyflie_firmware_native as native
from sim.robots.crazyflie_firmware import CrazyflieFirmware, written_key
from sim.tasks.base import Controls, Task, worlds_due
from sim.tasks.crazyflie.constants import MODEL_PATH, REST_Z
from sim.tasks.crazyflie.hover_config import (
    ACTION_SPECS,
    DR_LEVELS,
    FIRMWARE_IMPLS,
    INTEGRATORS,
    LATENCY_HISTORY,
    OBS_LAYOUT,
    OBS_NOISE_STD,
    RewardWeights,
)
from sim.tasks.crazyflie.hover_teacher import HoverTeacherGains, position_command
from sim.tasks.crazyflie.lean_model import lean_model_path
from sim.tasks.crazyflie.physical import (
    NOMINAL_MASS_KG,
    fixed_ranges,
    load_fit,
    recentred_ranges,
    weight_per_thrust_spread,
)

log = logging.getLogger(__name__)


@dataclass
class CrazyflieHover(Task):
    action_mode: str = "rpyt"
    goal: tuple[float, float, float] = option((0.0, 0.0, 1.0), FINITE)
    start_half_extent: float = option(1.0, NONNEG)  # starts uniform in a cube of this half size around the goal
    ground_start_prob: float = option(0.25, PROB)
    max_start_tilt_deg: float = option(30.0, Range(0, 180))
    max_start_speed: float = option(1.0, NONNEG)
    success_radius: float = option(0.1, POSITIVE)
    success_hold_s: float = option(2.0, NONNEG)
    # Training curriculum: starts grow from curriculum_start_extent to start_half_extent over this many
    # learning iterations (0: off). Evaluation never calls on_iteration, so it sees the full spread.
    curriculum_iterations: int = option(0, NONNEG_INT)
    curriculum_start_extent: float = option(0.2, NONNEG)
    push_interval_s: float = option(3.0, POSITIVE)
    push_speed: float = option(0.3, NONNEG)
    rewards: RewardWeights = option(factory=RewardWeights, rule=FINITE)
    # native: the firmware tick as a C control callback inside MuJoCo's step (CPU mujoco backend, needs gcc;
    # falls back to torch, with a log line, where it cannot be built); torch: the torch firmware between
    # substeps. Both compute the same values (to rounding); native is faster.
    firmware_impl: str = option("native", Choice(("native", "torch")))
    # A `robot-rl sysid` parameters file: randomization is centred on its fit (ranges from its intervals, with
    # a floor); with randomization=none every world has the fitted values. '' : the model's nominal values.
    sysid: str = ""

    model_path = MODEL_PATH
    control_dt = 0.01  # 100 Hz
    substeps = 5  # physics and firmware at 500 Hz
    num_actions = 4
    robot = "crazyflie_2_1"
    name = "crazyflie_hover"
    obs_layout = OBS_LAYOUT
    integrators = INTEGRATORS
    default_camera = "chase"

    def __post_init__(self):
        if self.action_mode not in ACTION_SPECS:
            raise ValueError(f"unknown action_mode '{self.action_mode}' (rpyt, ctbr, motors)")
        if self.firmware_impl not in FIRMWARE_IMPLS:
            raise ValueError(f"firmware_impl must be one of {', '.join(FIRMWARE_IMPLS)}, not '{self.firmware_impl}'")
        self.model_path = lean_model_path(self.model_path)  # the same dynamics, less work per step
        if self.firmware_impl == "native":  # per-world firmware state lives in MjData.userdata
            self.model_path = native.model_with_userdata(self.model_path)
        self.extent = self.start_half_extent
        self.action_spec = ACTION_SPECS[self.action_mode]

    def on_iteration(self, iteration: int) -> None:
        """Called by the trainer before each learning iteration."""
        if self.curriculum_iterations > 0:
            f = min(1.0, iteration / self.curriculum_iterations)
            self.extent = self.curriculum_start_extent + f * (self.start_half_extent - self.curriculum_start_extent)

    # -- setup -----------------------------------------------------------------------------------
    def attach(self, backend, cfg, rng: torch.Generator) -> None:
        self.backend, self.cfg, self.rng = backend, cfg, rng
        self.device = backend.device  # every tensor of the task lives on the backend's device
        n = backend.num_worlds
        self.n = n
        self.dr = DR_LEVELS[cfg.randomization]
        spec = self.action_spec
        self.act_offset = torch.tensor(spec["offset"], dtype=torch.float64, device=self.device)
        self.act_scale = torch.tensor(spec["scale"], dtype=torch.float64, device=self.device)
        self.act_low = torch.tensor(spec["low"], dtype=torch.float64, device=self.device)
        self.act_high = torch.tensor(spec["high"], dtype=torch.float64, device=self.device)
        m = backend.model
        # The teacher's feed-forward: the nominal drone's hover thrust, or the fitted drone's when centred on a
        # fit (its integral action has a bounded reach, and a teacher aiming at the wrong hover teaches a
        # student that hovers off the goal).
        self.teacher_mass_kg = float(m.body_mass[1])
        self.teacher_gains = HoverTeacherGains()
        if self.sysid:
            fit = load_fit(self.sysid)
            self.dr = recentred_ranges(self.dr, fit) if self.dr else fixed_ranges(fit)
            mass = fit["mass_kg"][0] if "mass_kg" in fit else self.teacher_mass_kg
            self.teacher_mass_kg = mass / (fit["thrust_scale"][0] if "thrust_scale" in fit else 1.0)
            # The integral then only has to cover the spread of weight per thrust around the fit: its nominal
            # reach (0.45 g, for nominal DR) winds up on every take-off into pure excess thrust (measured on the
            # fitted drone from the floor: 0.95 m over the goal with 0.45, 0.16 m with 0.1).
            spread = weight_per_thrust_spread(self.dr, mass / NOMINAL_MASS_KG, self.teacher_mass_kg / mass)
            self.teacher_gains = replace(self.teacher_gains, max_integral_z=max(0.1, 1.5 * spread))
        self.latency = torch.zeros(n, dtype=torch.long, device=self.device)
        self.firmware = self._make_firmware(backend)
        self.native = isinstance(self.firmware, native.NativeFirmware)
        self.goal_pos = torch.tensor(self.goal, dtype=torch.float64, device=self.device).repeat(n, 1)
        self.action = torch.zeros(n, 4, dtype=torch.float64, device=self.device)  # current policy action
        self.prev_action = torch.zeros(n, 4, dtype=torch.float64, device=self.device)
        # commands still in flight: cmd_hist[:, j] was issued j control steps ago (latency up to 3 steps); the
        # native firmware reads them from userdata, so there cmd_hist is a view of it, written in place
        if self.native:
            self.cmd_hist = self.firmware.cmd_hist
        else:
            self.cmd_hist = torch.zeros(n, LATENCY_HISTORY, 4, dtype=torch.float64, device=self.device)
        # steps since the position error was last >= the radius
        self.bad_steps_since = torch.zeros(n, dtype=torch.long, device=self.device)
        self.max_err = torch.zeros(n, dtype=torch.float64, device=self.device)
        self.crashed = torch.zeros(n, dtype=torch.bool, device=self.device)
        self.err_int = torch.zeros(n, 3, dtype=torch.float64, device=self.device)
        self.last_raw: dict[str, torch.Tensor] = {}
        self.nominal = {
            "mass": float(m.body_mass[1]),
            "inertia": torch.tensor(m.body_inertia[1].copy(), device=self.device),
            "tau": float(m.actuator_dynprm[0, 0]),
            "gear_sign": torch.tensor(m.actuator_gear[:, 5].copy(), device=self.device).sign(),
        }
        if self.dr:
            self.mass = backend.expand("body_mass")
            self.inertia = backend.expand("body_inertia")
            self.dynprm = backend.expand("actuator_dynprm")
            self.gear = backend.expand("actuator_gear")

    def _make_firmware(self, backend):
        if self.firmware_impl == "native":
            if getattr(backend, "name", None) != "mujoco":
                log.info("crazyflie firmware: the %s backend runs the torch firmware", backend.name)
            elif backend.model.nuserdata < native.NUSERDATA:
                log.warning("crazyflie firmware: model without userdata for the native firmware; running torch")
            elif (lib := native.load()) is not None:  # None: load() has said why
                return native.NativeFirmware(backend, lib, self.action_mode, self.substeps, self.latency)
        return CrazyflieFirmware(backend.num_worlds, dt=backend.model.opt.timestep, device=self.device)

    def _uniform(self, ids: torch.Tensor, lo: float, hi: float, k: int = 1) -> torch.Tensor:
        return lo + (hi - lo) * torch.rand(len(ids), k, generator=self.rng, dtype=torch.float64, device=self.device)

    # -- resets ----------------------------------------------------------------------------------
    def _randomize(self, ids: torch.Tensor) -> None:
        d = self.dr
        if not d:
            return
        self.mass[ids, 1] = self.nominal["mass"] * self._uniform(ids, *d["mass"])[:, 0]
        self.inertia[ids, 1] = self.nominal["inertia"] * self._uniform(ids, *d["inertia"])
        self.dynprm[ids, :, 0] = self._uniform(ids, *d["motor_tau"], k=4)
        self.gear[ids, :, 5] = self.nominal["gear_sign"] * self._uniform(ids, *d["torque_ratio"])
        self.firmware.kf_scale[ids] = self._uniform(ids, *d["kf"])
        self.firmware.gain_scale[ids] = self._uniform(ids, *d["pid_gain"], k=3)
        lo, hi = d["latency_substeps"]
        if self.cfg.action_latency:
            self.latency[ids] = torch.randint(lo, hi + 1, (len(ids),), generator=self.rng, device=self.device)
        self.backend.set_const(ids)  # only the re-randomized worlds: it costs ~1.6 ms for 1024

    def sample_goals(self, ids: torch.Tensor) -> None:
        self.goal_pos[ids] = torch.tensor(self.goal, dtype=torch.float64, device=self.device)

    def reset_worlds(self, ids: torch.Tensor) -> None:
        b, k = self.backend, len(ids)
        self._randomize(ids)
        self.sample_goals(ids)
        pos = self.goal_pos[ids] + self._uniform(ids, -self.extent, self.extent, 3)
        ground = (torch.rand(k, generator=self.rng, device=self.device) < self.ground_start_prob) | (
            pos[:, 2] < REST_Z + 0.05
        )
        pos[:, 2] = torch.where(ground, torch.full_like(pos[:, 2], REST_Z), pos[:, 2])
        # tilt: random horizontal axis, angle up to the limit; yaw uniform
        tilt = torch.deg2rad(self._uniform(ids, 0.0, self.max_start_tilt_deg))[:, 0] * (~ground)
        axis_angle = self._uniform(ids, -math.pi, math.pi)[:, 0]
        yaw = self._uniform(ids, -math.pi, math.pi)[:, 0]
        q_tilt = torch.stack(
            [
                torch.cos(tilt / 2),
                torch.sin(tilt / 2) * torch.cos(axis_angle),
                torch.sin(tilt / 2) * torch.sin(axis_angle),
                torch.zeros_like(tilt),
            ],
            dim=1,
        )
        q_yaw = torch.stack(
            [torch.cos(yaw / 2), torch.zeros_like(yaw), torch.zeros_like(yaw), torch.sin(yaw / 2)], dim=1
        )
        quat = quat_mul(q_tilt, q_yaw)
        direction = torch.randn(k, 3, generator=self.rng, dtype=torch.float64, device=self.device)
        direction = direction / direction.norm(dim=1, keepdim=True).clamp(min=1e-9)
        speed = self._uniform(ids, 0.0, self.max_start_speed) * (~ground).unsqueeze(1)
        b.qpos[ids, 0:3] = pos
        b.qpos[ids, 3:7] = quat
        b.qvel[ids, 0:3] = direction * speed
        b.qvel[ids, 3:6] = 0.0
        self.firmware.reset(ids)
        self.action[ids] = 0.0
        self.prev_action[ids] = 0.0
        self.cmd_hist[ids] = 0.0  # motors idle until the first command, like a real drone on the pad
        self.bad_steps_since[ids] = 0
        self.max_err[ids] = 0.0
        self.crashed[ids] = False
        self.err_int[ids] = 0.0
        self.pos_err = (b.qpos[:, 0:3] - self.goal_pos).norm(dim=1)
        self._refresh_raw(ids)

    # -- stepping --------------------------------------------------------------------------------
    def command(self, a: torch.Tensor) -> torch.Tensor:
        # clamp(low, high) is max(min(x, high), low) whenever low <= high, in one call
        return (self.act_offset + self.act_scale * a).clamp_(self.act_low, self.act_high)

    def controls(self, actions: torch.Tensor) -> Controls:
        self.prev_action = self.action
        self.action = actions.to(torch.float64)
        return self.command_controls(self.command(self.action))

    def command_controls(self, cmd: torch.Tensor) -> Controls:
        """A control period of a command in robot units (rpyt: send_setpoint units): the firmware model
        ticks before every substep, as a native control callback or in torch."""
        if self.native:  # the callback picks each substep's command from cmd_hist, as _arrival_rows does
            self.cmd_hist.copy_(torch.cat([cmd.unsqueeze(1), self.cmd_hist[:, :-1]], dim=1))
            return Controls(callback=self.firmware.ticking())
        return self._torch_firmware_controls(cmd)

    def after_physics(self) -> None:
        self._update_status()
        self._refresh_raw(None)

    def _torch_firmware_controls(self, cmd: torch.Tensor) -> Controls:
        """The torch firmware's tick before each substep, from the attitude and gyro at that substep."""
        b = self.backend
        self.cmd_hist = torch.cat([cmd.unsqueeze(1), self.cmd_hist[:, :-1]], dim=1)
        # the command each world's firmware sees at each substep, in one gather per control step
        arrived = self.cmd_hist.reshape(-1, 4).index_select(0, self._arrival_rows()).view(self.substeps, self.n, 4)
        quat, gyro = b.qpos[:, 3:7], b.qvel[:, 3:6]
        # stopped motors (thrust setpoint <= 0.5 PWM) occur only where a reset world's first command has not
        # arrived yet: when no world has one this step, the firmware skips their masking (same values)
        may_idle = self.action_mode != "rpyt" or bool((arrived[:, :, 3] <= 0.5).any())
        return Controls(per_substep=lambda k: self._motor_thrust(arrived[k], quat, gyro, may_idle))

    def _arrival_rows(self) -> torch.Tensor:
        """Rows of cmd_hist.reshape(-1, 4) that reach the firmware at each substep, (substeps * n,), substep-major.

        A command reaches the drone `latency` substeps after it was issued (radio, queues, ROS hops): at
        substep k the newest command that has arrived was issued ceil((latency - k) / substeps) steps ago.
        Latencies change only at resets, so the rows are kept until the latency tensor is written to.
        """
        key = written_key(self.latency)
        if key is None or getattr(self, "_arrival_key", None) != key:
            dev = self.latency.device
            k = torch.arange(self.substeps, device=dev).unsqueeze(1)
            age = torch.div(self.latency - k + self.substeps - 1, self.substeps, rounding_mode="floor")
            age = age.clamp(0, LATENCY_HISTORY - 1)
            self._arrival = (torch.arange(self.n, device=dev) * LATENCY_HISTORY + age).flatten()
            self._arrival_key = key
        return self._arrival

    def _motor_thrust(self, cmd: torch.Tensor, quat: torch.Tensor, gyro: torch.Tensor, may_idle: bool = True):
        if self.action_mode == "rpyt":
            return self.firmware.motor_thrust(cmd, quat, gyro, may_idle)
        if self.action_mode == "ctbr":
            return self.firmware.motor_thrust_ctbr(cmd, gyro)
        return cmd * 0.15 * self.firmware.kf_scale  # motors: fraction of the nominal max thrust per motor

    def interval_events(self, step: torch.Tensor) -> None:
        due = worlds_due(step, self.push_interval_s, self.control_dt, bool(self.cfg.pushes and self.dr))
        if due.numel():
            kick = torch.randn(len(due), 3, generator=self.rng, dtype=torch.float64, device=self.device)
            self.backend.qvel[due, 0:3] += self.push_speed * kick / kick.norm(dim=1, keepdim=True).clamp(min=1e-9)

    def _update_status(self) -> None:
        b = self.backend
        err = (b.qpos[:, 0:3] - self.goal_pos).norm(dim=1)
        self.pos_err = err
        self.bad_steps_since = torch.where(err < self.success_radius, self.bad_steps_since + 1, 0)
        rzz = 1 - 2 * (b.qpos[:, 4] ** 2 + b.qpos[:, 5] ** 2)
        self.rzz = rzz
        out = (err > 3.5) | (b.qpos[:, 2] < -0.05)
        self.crashed = (rzz < 0.0) | out

    # -- observations and rewards ----------------------------------------------------------------
    def raw_state(self, noisy: bool, ids: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """Robot state in the units and frames a real robot reports (the bundle's raw state)."""
        return self._raw_state(noisy, ids, copy=True)

    def _raw_state(self, noisy: bool, ids: torch.Tensor | None, copy: bool) -> dict[str, torch.Tensor]:
        """raw_state; copy=False may return views of the live state, for use before the next write to it."""
        b = self.backend
        sel = slice(None) if ids is None else ids
        q = b.qpos[sel, 3:7]
        raw = {
            "position": b.qpos[sel, 0:3],
            "velocity": b.qvel[sel, 0:3],
            "quaternion": torch.cat([q[:, 1:4], q[:, 0:1]], dim=1),  # ROS order xyzw
            "angular_velocity": b.qvel[sel, 3:6],
            "goal": self.goal_pos[sel],
            "last_action": self.action[sel],
        }
        if noisy:
            for key, std in OBS_NOISE_STD.items():
                raw[key] = raw[key] + std * torch.randn(
                    raw[key].shape, generator=self.rng, dtype=torch.float64, device=self.device
                )
        if copy and ids is None:  # indexing with ids copied already, and the noisy sums are new tensors
            for key in ("position", "velocity", "angular_velocity", "goal", "last_action"):
                if not (noisy and key in OBS_NOISE_STD):
                    raw[key] = raw[key].clone()
        return raw

    def _refresh_raw(self, ids: torch.Tensor | None) -> None:
        """Once per control step (and at reset): the noisy raw state the policy sees, and the integrals
        updated from it exactly as the deploy runtime does on the robot."""
        raw = self.raw_state(noisy=self.cfg.obs_noise, ids=ids)
        spec = INTEGRATORS[0]
        sel = slice(None) if ids is None else ids
        dt = self.control_dt
        diff = raw[spec["inputs"][0]] - raw[spec["inputs"][1]]
        self.err_int[sel] = (self.err_int[sel] * (1.0 - dt / spec["leak_s"]) + diff * dt).clamp(
            -spec["clip"], spec["clip"]
        )
        raw[spec["name"]] = self.err_int[sel].clone()
        self.last_raw = store_raw_rows(self.last_raw, raw, ids, self.n)

    def observations(self) -> dict[str, torch.Tensor]:
        clean_raw = self._raw_state(noisy=False, ids=None, copy=False)
        clean_raw["goal_error_integral"] = self.err_int
        # the policy's (noisy) and the critic's (clean) observations in one pass over 2n rows: each term is
        # computed row by row, so the values are those of two passes, for half the torch calls
        both = build_observation(OBS_LAYOUT, {k: torch.cat([self.last_raw[k], v]) for k, v in clean_raw.items()})
        policy, clean = both[: self.n], both[self.n :]
        if not self.dr:
            return {"policy": policy, "critic": clean}
        return {"policy": policy, "critic": torch.cat([clean, self._dr_parameters()], dim=1)}

    def _dr_parameters(self) -> torch.Tensor:
        """The critic's randomized parameters, (n, 4) float32, recomputed after a write to one of them (resets)."""
        key = written_key(self.mass, self.firmware.kf_scale, self.dynprm, self.latency)
        if key is None or getattr(self, "_dr_key", None) != key:
            self._dr_obs = torch.cat(
                [
                    (self.mass[:, 1:2] / self.nominal["mass"]).float(),
                    self.firmware.kf_scale.float(),
                    (self.dynprm[:, :, 0].mean(dim=1, keepdim=True) * 10).float(),
                    (self.latency.unsqueeze(1).double() / 15).float(),
                ],
                dim=1,
            )
            self._dr_key = key
        return self._dr_obs

    def reward_terms(self) -> dict[str, torch.Tensor]:
        b, w = self.backend, self.rewards
        d = self.pos_err
        return {
            # all shaping terms are positive so that ending an episode early never pays
            "position": w.position * torch.exp(-d / 0.8),
            "near": w.near * torch.exp(-d / 0.15),
            "precision": w.precision * torch.exp(-((d / 0.05) ** 2)),
            "velocity": w.velocity * (b.qvel[:, 0:3] ** 2).sum(dim=1),
            "angular_velocity": w.angular_velocity * (b.qvel[:, 3:6] ** 2).sum(dim=1),
            "action_rate": w.action_rate * ((self.action - self.prev_action) ** 2).sum(dim=1),
            "tilt": w.tilt * (1 - self.rzz),
            "crash": w.crash * self.crashed.double(),
        }

    def trace_position(self) -> torch.Tensor:
        """The drone's position (see Task.trace_position)."""
        return self.backend.qpos[:, 0:3]

    def terminated(self) -> torch.Tensor:
        return self.crashed.clone()

    def episode_outcome(self, ids: torch.Tensor, time_outs: torch.Tensor) -> dict[str, torch.Tensor]:
        """Success: within success_radius at every step of the last success_hold_s, no crash."""
        hold = int(round(self.success_hold_s / self.control_dt))
        success = time_outs[ids] & (self.bad_steps_since[ids] >= hold) & ~self.crashed[ids]
        return {
            "success": success.double(),
            "crash": self.crashed[ids].double(),
            "position_error_m": self.pos_err[ids].clone(),
        }

    TEACHERS: ClassVar[tuple[str, ...]] = ("position_controller",)

    def teacher(self, name: str) -> torch.Tensor:
        """The scripted expert's action (n, 4) in policy units [-1, 1]: hover_teacher.position_command on the
        true state and the observed goal error integral, rpyt only (the firmware's attitude loop is what it
        commands). Its hover thrust is the nominal drone's, or the fitted one's with task.params.sysid=."""
        if name not in self.TEACHERS or self.action_mode != "rpyt":
            raise ValueError(
                f"task '{self.name}' ({self.action_mode}) has no teacher '{name}' (rpyt teachers: "
                f"{', '.join(self.TEACHERS)})"
            )
        b = self.backend
        rpyt = position_command(b.qpos[:, 0:3], b.qvel[:, 0:3], b.qpos[:, 3:7], self.goal_pos, self.err_int,
                                self.teacher_mass_kg, self.teacher_gains)  # fmt: skip
        return ((rpyt - self.act_offset) / self.act_scale).clamp(-1.0, 1.0)

    def controller_state(self) -> list[torch.Tensor]:
        return self.firmware.state() + [self.action, self.cmd_hist, self.err_int]


def quat_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    aw, ax, ay, az = a.unbind(1)
    bw, bx, by, bz = b.unbind(1)
    return torch.stack(
        [aw * bw - ax * bx - ay * by - az * bz,
         aw * bx + ax * bw + ay * bz - az * by,
         aw * by - ax * bz + ay * bw + az * bx,
         aw * bz + ax * by - ay * bx + az * bw], dim=1)  # fmt: skip
