"""The safety supervisor of joint-space robots (arms, legs): what their safety nodes decide, without ROS.

Commands are joint position targets (an arm: 7 joints in rad, then the two fingers in m; a Go1: 12
joints). The fallback depends on the robot. An arm's position controller holds its last command
forever, so the arm's fallback is HOLD: a fixed pose captured when the fallback began, streamed at
the watchdog rate. A legged robot cannot hold a pose it is falling out of, so its fallback is DAMP:
zero stiffness and joint damping, which lowers it to the ground (Unitree's damping mode). E-stop is
the same fallback, latched; the node also calls the robot's own e-stop as a second path. Time is
passed in explicitly, as in the drone supervisor, so the logic is tested in plain Python.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np

from robot_rl.deploy.joint_limits import JointLimits, arm_limits, filter_targets, outside_box
from robot_rl_ros.event_log import EventLog
from robot_rl_ros.limits import is_finite, tilt_deg
from robot_rl_ros.monitor import CommanderWatch, InputMonitor


class JointMode(IntEnum):
    """Ordered by severity: the supervisor only moves up, except when (re-)armed. A robot uses one of
    HOLD (arms) or DAMP (legs) as its fallback."""

    DISARMED = 0
    ACTIVE = 1
    HOLD = 2
    DAMP = 3
    ESTOP = 4


@dataclass
class JointSupervisorConfig:
    limits: JointLimits = field(default_factory=arm_limits)
    fallback: str = "hold"  # "hold" (arms) or "damp" (legs)
    state_max_age_s: float = 0.1
    state_max_future_s: float = 0.05  # stamps ahead of this node's clock by more are rejected
    command_timeout_s: float = 0.2  # 5 periods of a 25 Hz policy
    max_tilt_deg: float | None = None  # legs: trunk tilt beyond this (fallen) -> fallback
    auto_arm: bool = True

    def __post_init__(self):
        if self.fallback not in ("hold", "damp"):
            raise ValueError(f"fallback must be 'hold' or 'damp', got '{self.fallback}'")


@dataclass
class JointEvent:
    time: float
    kind: str
    reason: str


class JointSupervisor:
    def __init__(
        self,
        cfg: JointSupervisorConfig,
        prearm_problems: list[str],
        tcp_position: Callable[[np.ndarray], np.ndarray] | None = None,
    ):
        """tcp_position(q7) -> TCP xyz (m); None disables the workspace checks (reported)."""
        self.cfg = cfg
        self.n = cfg.limits.n
        self.prearm_problems = list(prearm_problems)
        self.tcp_position = tcp_position
        self.mode = JointMode.DISARMED
        self.reason = "waiting for pre-arm checks"
        self.mode_since = 0.0
        self.state_in = InputMonitor("joint_states", cfg.state_max_age_s, cfg.state_max_future_s)
        self.q: np.ndarray | None = None
        self.action: np.ndarray | None = None
        self.action_time: float | None = None
        self.hold_pose: np.ndarray | None = None
        self.first_state_time: float | None = None
        self.last_cmd: np.ndarray | None = None
        self.last_cmd_time: float | None = None
        self.events = EventLog()
        self.counts = {
            k: 0
            for k in (
                "action.nonfinite",
                "action.bad_dim",
                "action.stale",
                "limit.joint",
                "limit.lead",
                "limit.speed",
                "limit.workspace",
                "commands",
            )
        }
        self.commanders = CommanderWatch()

    # ----- inputs -----
    @property
    def fallback_mode(self) -> JointMode:
        return JointMode.HOLD if self.cfg.fallback == "hold" else JointMode.DAMP

    def on_state(self, q: np.ndarray, stamp: float, now: float) -> str | None:
        q = np.asarray(q, dtype=np.float64).reshape(-1)
        if q.shape != (self.n,):
            return self.note(now, "input", f"joint_states: {q.size} positions, expected {self.n}")
        if not is_finite(q):
            return self.note(now, "input", self.state_in.reject_nonfinite())
        why = self.state_in.accept(stamp, now)
        if why is not None:
            return self.note(now, "input", why)
        self.q = q
        if self.hold_pose is None:
            self.hold_pose = q.copy()  # disarmed: hold where the arm is found
            self.first_state_time = now
        self._check_workspace(now)
        return None

    def awaits_state(self, action_stamp: float) -> bool:
        """True when an action answers a joint state newer than the last one accepted: judged against the older
        one, its lead limit would act on a pose the policy had already left (a DDS race a loaded machine shows)."""
        return self.state_in.last_stamp is None or action_stamp > self.state_in.last_stamp

    def on_action(self, action, now: float, stamp: float | None = None) -> str | None:
        """The policy's joint targets; stamp: the stamp of the joint state they answer, if the message says
        (an action that answers a state older than state_max_age_s is dropped: it was computed for another pose)."""
        a = np.asarray(action, dtype=np.float64).reshape(-1)
        if a.shape != (self.n,):
            return self.refuse_action(now, f"policy action has {a.size} values, expected {self.n}")
        if not is_finite(a):
            self.counts["action.nonfinite"] += 1
            return self._fall(now, self.fallback_mode, "policy action is not finite")
        if stamp is not None and now - stamp > self.cfg.state_max_age_s:
            self.counts["action.stale"] += 1
            age, limit = (now - stamp) * 1e3, self.cfg.state_max_age_s * 1e3
            return self.note(now, "input", f"policy action answers a state {age:.0f} ms old > {limit:.0f} ms")
        self.action, self.action_time = a, now
        return None

    def awaits_first_action(self, now: float) -> bool:
        """Disarmed, the robot's state known for less than command_timeout_s and no policy action yet: a hold sent
        now would race the policy's first action for the same state (a lock-stepped simulator steps on either)."""
        return (
            self.mode == JointMode.DISARMED
            and self.action_time is None
            and self.first_state_time is not None
            and now - self.first_state_time < self.cfg.command_timeout_s
        )

    def refuse_action(self, now: float, reason: str) -> str:
        """An action of the wrong shape (size, joint names): the fallback."""
        self.counts["action.bad_dim"] += 1
        return self._fall(now, self.fallback_mode, reason)

    def on_command_publishers(self, now: float, topic: str, others: list[str], settling: str | None = None) -> None:
        """Who else publishes the robot's command topic (a graph query): a fault that blocks arming and,
        once armed, engages the fallback."""
        reason = self.commanders.update(topic, others, settling)
        if reason and self.mode == JointMode.ACTIVE:
            self._fall(now, self.fallback_mode, reason)
        elif reason:
            self.note(now, "fault", reason)

    def estop(self, now: float, reason: str) -> None:
        if self.mode != JointMode.ESTOP:
            self._set(now, JointMode.ESTOP, reason)

    def arm(self, now: float) -> str | None:
        if self.mode == JointMode.ESTOP:
            return "emergency stop is latched; restart the safety node"
        blockers = self.arm_blockers(now)
        if blockers:
            return "; ".join(blockers)
        self._set(now, JointMode.ACTIVE, "armed")
        return None

    def arm_blockers(self, now: float) -> list[str]:
        out = list(self.prearm_problems)
        if self.commanders.blocker:
            out.append(self.commanders.blocker)
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

    def on_attitude(self, quat_xyzw, now: float) -> None:
        """Legs: the trunk's attitude (IMU); beyond max_tilt_deg the robot has fallen -> fallback."""
        if self.cfg.max_tilt_deg is None or not is_finite(quat_xyzw):
            return
        tilt = tilt_deg(np.asarray(quat_xyzw, dtype=np.float64))
        if self.mode == JointMode.ACTIVE and tilt > self.cfg.max_tilt_deg:
            self._fall(now, self.fallback_mode, f"attitude: tilt {tilt:.0f} deg > {self.cfg.max_tilt_deg:.0f} deg")

    # ----- output -----
    @property
    def damping(self) -> bool:
        """True when the command is damping only (zero stiffness): DAMP, or a legged robot's e-stop."""
        return self.mode == JointMode.DAMP or (self.mode == JointMode.ESTOP and self.cfg.fallback == "damp")

    def step(self, now: float) -> np.ndarray | None:
        """Joint targets to send now, or None before the robot's pose is known (nothing safe to send).
        While `damping`, the targets are the measured joints and only the damping gain acts."""
        self._watchdogs(now)
        if self.mode == JointMode.DISARMED and self.cfg.auto_arm and not self.arm_blockers(now):
            self.arm(now)
        if self.mode == JointMode.ACTIVE:
            cmd = self._filter(self.action, now)
        elif self.damping and self.q is not None:
            cmd = self.q.copy()
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
        dt = 0.0 if self.last_cmd_time is None else now - self.last_cmd_time
        cmd, hits, refused = filter_targets(action, self.q, self.last_cmd, dt, self.cfg.limits, self.tcp_position)
        for name, hit in hits.items():
            self.counts[f"limit.{name}"] += hit
        if refused:
            self.note(now, "intervention", f"commanded {refused}")
        return cmd

    # ----- mode logic -----
    def check(self, now: float) -> None:
        self._watchdogs(now)

    def _watchdogs(self, now: float) -> None:
        if self.mode != JointMode.ACTIVE:
            return
        if not self.state_in.fresh(now):
            self._fall(
                now,
                self.fallback_mode,
                f"joint_states stale: {self.state_in.age(now) * 1e3:.0f} ms > {self.cfg.state_max_age_s * 1e3:.0f} ms",
            )
        elif self.action_time is None or now - self.action_time > self.cfg.command_timeout_s:
            age = float("inf") if self.action_time is None else now - self.action_time
            self._fall(
                now,
                self.fallback_mode,
                f"policy command stale: {age * 1e3:.0f} ms > {self.cfg.command_timeout_s * 1e3:.0f} ms",
            )

    def _check_workspace(self, now: float) -> None:
        if self.mode != JointMode.ACTIVE or self.tcp_position is None:
            return
        lim = self.cfg.limits
        why = outside_box(self.tcp_position(self.q[:7]), lim.workspace_low, lim.workspace_high, lim.workspace_margin_m)
        if why:
            self._fall(now, self.fallback_mode, f"workspace: {why}")

    def _fall(self, now: float, mode: JointMode, reason: str) -> str:
        if self.mode != JointMode.DISARMED and mode > self.mode:
            self._set(now, mode, reason)
        else:
            self.note(now, "intervention", reason)
        return reason

    def _set(self, now: float, mode: JointMode, reason: str) -> None:
        if mode >= JointMode.HOLD and self.mode in (JointMode.DISARMED, JointMode.ACTIVE):
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
        self.events.append(JointEvent(now, mode.name, reason))

    def note(self, now: float, kind: str, reason: str) -> str:
        self.events.append(JointEvent(now, kind, reason))
        return reason

    def counters(self) -> dict[str, int]:
        return {
            **self.counts,
            **self.state_in.counters(),
            "command.second_publisher": self.commanders.checks_with_conflict,
        }
