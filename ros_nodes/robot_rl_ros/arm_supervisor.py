"""The arm safety supervisor: what the arm safety node decides, without ROS.

Commands are joint position targets (7 joints in rad, then the two fingers in m), as a ros2_control
forward position controller or Franka's joint impedance takes them. A position controller holds
its last command forever, so the fallback is HOLD: a fixed pose captured when the fallback began,
streamed at the watchdog rate. E-stop is the same hold, latched (the robot's own e-stop, its
brakes, is called as a second path by the node). Time is passed in explicitly, as in the drone
supervisor, so the logic is tested in plain Python.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from enum import IntEnum

import numpy as np

from robot_rl_ros.limits import is_finite
from robot_rl_ros.monitor import InputMonitor

N_JOINTS = 9  # 7 arm joints + 2 fingers


class ArmMode(IntEnum):
    """Ordered by severity: the supervisor only moves up, except when (re-)armed."""

    DISARMED = 0
    ACTIVE = 1
    HOLD = 2
    ESTOP = 3


def _v(*x: float) -> Callable[[], np.ndarray]:
    return lambda: np.array(x, dtype=np.float64)


@dataclass
class ArmLimits:
    # Franka joint limits less 0.05 rad; fingers 0..0.04 m.
    q_low: np.ndarray = field(default_factory=_v(-2.8473, -1.7128, -2.8473, -3.0218, -2.8473, 0.0325, -2.8473, 0, 0))
    q_high: np.ndarray = field(default_factory=_v(2.8473, 1.7128, 2.8473, -0.1198, 2.8473, 3.7025, 2.8473, 0.04, 0.04))
    # Largest |target - measured|: a target far from where the arm is means a large torque step.
    max_lead: np.ndarray = field(default_factory=_v(*[0.2] * 7, 0.05, 0.05))
    # Largest change of the target per second (Franka's joint speed limits; finger 0.2 m/s).
    max_speed: np.ndarray = field(default_factory=_v(2.175, 2.175, 2.175, 2.175, 2.61, 2.61, 2.61, 0.2, 0.2))
    # TCP box (m, base frame): a commanded pose outside it is refused; the measured TCP beyond it
    # by workspace_margin_m -> HOLD.
    workspace_low: np.ndarray = field(default_factory=_v(0.1, -0.7, 0.005))
    workspace_high: np.ndarray = field(default_factory=_v(0.95, 0.7, 1.0))
    workspace_margin_m: float = 0.03

    @staticmethod
    def from_params(p: dict) -> ArmLimits:
        out = ArmLimits()
        for f in fields(ArmLimits):
            if f.name in p and p[f.name] is not None:
                v = p[f.name]
                setattr(out, f.name, np.asarray(v, dtype=np.float64) if isinstance(v, (list, tuple)) else float(v))
        for name in ("q_low", "q_high", "max_lead", "max_speed"):
            if getattr(out, name).shape != (N_JOINTS,):
                raise ValueError(f"limit '{name}' needs {N_JOINTS} values (7 joints, 2 fingers)")
        for name in ("workspace_low", "workspace_high"):
            if getattr(out, name).shape != (3,):
                raise ValueError(f"limit '{name}' needs 3 values (x, y, z)")
        if np.any(out.q_low > out.q_high) or np.any(out.workspace_low > out.workspace_high):
            raise ValueError("a low limit exceeds its high limit")
        if np.any(out.max_lead <= 0) or np.any(out.max_speed <= 0):
            raise ValueError("max_lead and max_speed must be positive")
        return out


# ----- limiters: each returns the changed targets and whether it changed anything -----
def clip_joints(q: np.ndarray, low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, bool]:
    out = np.clip(q, low, high)
    return out, bool(np.any(out != q))


def limit_lead(q: np.ndarray, measured: np.ndarray, max_lead: np.ndarray) -> tuple[np.ndarray, bool]:
    out = measured + np.clip(q - measured, -max_lead, max_lead)
    return out, bool(np.any(np.abs(out - q) > 1e-12))


def limit_speed(q: np.ndarray, prev: np.ndarray | None, dt: float, max_speed: np.ndarray) -> tuple[np.ndarray, bool]:
    if prev is None or dt <= 0:
        return q, False
    out = prev + np.clip(q - prev, -max_speed * dt, max_speed * dt)
    return out, bool(np.any(np.abs(out - q) > 1e-12))


def outside_box(p: np.ndarray, low: np.ndarray, high: np.ndarray, margin: float = 0.0) -> str | None:
    for i, axis in enumerate("xyz"):
        if p[i] < low[i] - margin or p[i] > high[i] + margin:
            return f"TCP {axis} = {p[i]:.3f} m outside [{low[i]:.3f}, {high[i]:.3f}] m"
    return None


@dataclass
class ArmSupervisorConfig:
    limits: ArmLimits = field(default_factory=ArmLimits)
    state_max_age_s: float = 0.1
    command_timeout_s: float = 0.2  # 5 periods of a 25 Hz policy
    auto_arm: bool = True


@dataclass
class ArmEvent:
    time: float
    kind: str
    reason: str


class ArmSupervisor:
    def __init__(
        self,
        cfg: ArmSupervisorConfig,
        prearm_problems: list[str],
        tcp_position: Callable[[np.ndarray], np.ndarray] | None = None,
    ):
        """tcp_position(q7) -> TCP xyz (m); None disables the workspace checks (reported)."""
        self.cfg = cfg
        self.prearm_problems = list(prearm_problems)
        self.tcp_position = tcp_position
        self.mode = ArmMode.DISARMED
        self.reason = "waiting for pre-arm checks"
        self.mode_since = 0.0
        self.state_in = InputMonitor("joint_states", cfg.state_max_age_s)
        self.q: np.ndarray | None = None
        self.action: np.ndarray | None = None
        self.action_time: float | None = None
        self.hold_pose: np.ndarray | None = None
        self.last_cmd: np.ndarray | None = None
        self.last_cmd_time: float | None = None
        self.events: list[ArmEvent] = []
        self.counts = {k: 0 for k in ("action.nonfinite", "action.bad_dim", "limit.joint", "limit.lead",
                                      "limit.speed", "limit.workspace", "commands")}  # fmt: skip

    # ----- inputs -----
    def on_state(self, q: np.ndarray, stamp: float, now: float) -> str | None:
        q = np.asarray(q, dtype=np.float64).reshape(-1)
        if q.shape != (N_JOINTS,):
            return self.note(now, "input", f"joint_states: {q.size} positions, expected {N_JOINTS}")
        if not is_finite(q):
            return self.note(now, "input", self.state_in.reject_nonfinite())
        why = self.state_in.accept(stamp, now)
        if why is not None:
            return self.note(now, "input", why)
        self.q = q
        if self.hold_pose is None:
            self.hold_pose = q.copy()  # disarmed: hold where the arm is found
        self._check_workspace(now)
        return None

    def on_action(self, action, now: float) -> str | None:
        a = np.asarray(action, dtype=np.float64).reshape(-1)
        if a.shape != (N_JOINTS,):
            self.counts["action.bad_dim"] += 1
            return self._fall(now, ArmMode.HOLD, f"policy action has {a.size} values, expected {N_JOINTS}")
        if not is_finite(a):
            self.counts["action.nonfinite"] += 1
            return self._fall(now, ArmMode.HOLD, "policy action is not finite")
        self.action, self.action_time = a, now
        return None

    def estop(self, now: float, reason: str) -> None:
        if self.mode != ArmMode.ESTOP:
            self._set(now, ArmMode.ESTOP, reason)

    def arm(self, now: float) -> str | None:
        if self.mode == ArmMode.ESTOP:
            return "emergency stop is latched; restart the safety node"
        blockers = self.arm_blockers(now)
        if blockers:
            return "; ".join(blockers)
        self._set(now, ArmMode.ACTIVE, "armed")
        return None

    def arm_blockers(self, now: float) -> list[str]:
        out = list(self.prearm_problems)
        if not self.state_in.fresh(now):
            out.append(f"joint_states not fresh (age {self.state_in.age(now):.2f} s)")
        if self.action_time is None or now - self.action_time > self.cfg.command_timeout_s:
            out.append("no fresh policy action")
        if self.q is not None and self.tcp_position is not None:
            lim = self.cfg.limits
            why = outside_box(self.tcp_position(self.q[:7]), lim.workspace_low, lim.workspace_high)
            if why:
                out.append(why)
        return out

    # ----- output -----
    def step(self, now: float) -> np.ndarray | None:
        """Joint targets to send now, or None before the arm's pose is known (nothing safe to send)."""
        self._watchdogs(now)
        if self.mode == ArmMode.DISARMED and self.cfg.auto_arm and not self.arm_blockers(now):
            self.arm(now)
        if self.mode == ArmMode.ACTIVE:
            cmd = self._filter(self.action, now)
        else:
            cmd = self.hold_pose
        if cmd is None:
            return None
        if not is_finite(cmd):  # cannot happen by construction; a NaN command must never leave
            cmd = self.hold_pose if self.hold_pose is not None and is_finite(self.hold_pose) else None
            if cmd is None:
                return None
        self.last_cmd, self.last_cmd_time = cmd.copy(), now
        self.counts["commands"] += 1
        return cmd

    def _filter(self, action: np.ndarray, now: float) -> np.ndarray:
        lim = self.cfg.limits
        cmd, hit = clip_joints(action, lim.q_low, lim.q_high)
        self.counts["limit.joint"] += hit
        cmd, hit = limit_lead(cmd, self.q, lim.max_lead)
        self.counts["limit.lead"] += hit
        dt = 0.0 if self.last_cmd_time is None else now - self.last_cmd_time
        cmd, hit = limit_speed(cmd, self.last_cmd, dt, lim.max_speed)
        self.counts["limit.speed"] += hit
        if self.tcp_position is not None:
            why = outside_box(self.tcp_position(cmd[:7]), lim.workspace_low, lim.workspace_high)
            if why:  # refuse the pose: keep the last target, or where the arm is
                self.counts["limit.workspace"] += 1
                self.note(now, "intervention", f"commanded {why}")
                cmd = self.last_cmd if self.last_cmd is not None else self.q.copy()
        return cmd

    # ----- mode logic -----
    def check(self, now: float) -> None:
        self._watchdogs(now)

    def _watchdogs(self, now: float) -> None:
        if self.mode != ArmMode.ACTIVE:
            return
        if not self.state_in.fresh(now):
            self._fall(now, ArmMode.HOLD, f"joint_states stale: {self.state_in.age(now) * 1e3:.0f} ms"
                       f" > {self.cfg.state_max_age_s * 1e3:.0f} ms")  # fmt: skip
        elif self.action_time is None or now - self.action_time > self.cfg.command_timeout_s:
            age = float("inf") if self.action_time is None else now - self.action_time
            self._fall(now, ArmMode.HOLD, f"policy command stale: {age * 1e3:.0f} ms"
                       f" > {self.cfg.command_timeout_s * 1e3:.0f} ms")  # fmt: skip

    def _check_workspace(self, now: float) -> None:
        if self.mode != ArmMode.ACTIVE or self.tcp_position is None:
            return
        lim = self.cfg.limits
        why = outside_box(self.tcp_position(self.q[:7]), lim.workspace_low, lim.workspace_high, lim.workspace_margin_m)
        if why:
            self._fall(now, ArmMode.HOLD, f"workspace: {why}")

    def _fall(self, now: float, mode: ArmMode, reason: str) -> str:
        if self.mode != ArmMode.DISARMED and mode > self.mode:
            self._set(now, mode, reason)
        else:
            self.note(now, "intervention", reason)
        return reason

    def _set(self, now: float, mode: ArmMode, reason: str) -> None:
        if mode in (ArmMode.HOLD, ArmMode.ESTOP) and self.mode in (ArmMode.DISARMED, ArmMode.ACTIVE):
            # Hold the last target sent when it is close to the arm (no jump), else where the arm is.
            fresh = self.q is not None and self.state_in.fresh(now)
            if fresh and self.last_cmd is not None:
                near = np.all(np.abs(self.last_cmd - self.q) <= self.cfg.limits.max_lead)
                self.hold_pose = (self.last_cmd if near else self.q).copy()
            elif fresh:
                self.hold_pose = self.q.copy()
            elif self.last_cmd is not None:
                self.hold_pose = self.last_cmd.copy()
        self.mode, self.reason, self.mode_since = mode, reason, now
        self.events.append(ArmEvent(now, mode.name, reason))

    def note(self, now: float, kind: str, reason: str) -> str:
        self.events.append(ArmEvent(now, kind, reason))
        del self.events[:-1000]
        return reason

    def counters(self) -> dict[str, int]:
        return {**self.counts, **self.state_in.counters()}
