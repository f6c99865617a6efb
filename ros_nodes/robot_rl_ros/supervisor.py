"""The safety supervisor: what the safety node decides, without ROS.

It owns the mode (pre-arm gate, active, fallback chain, e-stop), filters policy commands through
the limiters and records every intervention with its reason. Time is passed in explicitly (ROS
time, wall or simulated), so the same logic is tested in plain Python and runs in the node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np

from robot_rl_ros import limits as L
from robot_rl_ros.event_log import EventLog
from robot_rl_ros.fallback import MOTORS_OFF, FallbackController
from robot_rl_ros.monitor import CommanderWatch, InputMonitor


class Mode(IntEnum):
    """Ordered by severity: the supervisor only moves up, except when (re-)armed."""

    DISARMED = 0
    ACTIVE = 1
    HOVER = 2
    LAND = 3
    MOTORS_OFF = 4
    ESTOP = 5


@dataclass
class SupervisorConfig:
    limits: L.DroneLimits = field(default_factory=L.DroneLimits)
    state_max_age_s: float = 0.2
    # how far a state's stamp may run ahead of this node's clock (skew, lock-step delivery order)
    state_max_future_s: float = 0.05
    # a unit quaternion within this of norm 1 (the estimator normalises; zero or garbage is a fault)
    quaternion_norm_tol: float = 0.05
    command_timeout_s: float = 0.1
    hover_timeout_s: float = 2.0
    land_timeout_s: float = 6.0
    landed_z_m: float = 0.05
    auto_arm: bool = True
    action_dim: int = 4
    # zero-thrust setpoints that must reach the robot before arming (the firmware's thrust lock)
    unlock_setpoints: int = 10


@dataclass
class Intervention:
    time: float
    kind: str
    reason: str


class SafetySupervisor:
    def __init__(self, cfg: SupervisorConfig, prearm_problems: list[str], fallback: FallbackController | None = None):
        self.cfg = cfg
        self.prearm_problems = list(prearm_problems)
        self.fallback = fallback or FallbackController()
        self.mode = Mode.DISARMED
        self.reason = "waiting for pre-arm checks"
        self.mode_since = 0.0
        self.state_in = InputMonitor("state", cfg.state_max_age_s, cfg.state_max_future_s)
        self.state: dict | None = None
        self.neighbours: dict[str, np.ndarray] = {}
        self.neighbour_in: dict[str, InputMonitor] = {}
        self.action: np.ndarray | None = None
        self.action_time: float | None = None
        self.hover_z: float | None = None
        self.last_cmd: np.ndarray | None = None
        self.last_cmd_time: float | None = None
        # The firmware ignores thrust until it has seen a zero-thrust setpoint (thrust lock), so we
        # never arm before at least one disarmed, zero-thrust command has gone out.
        self.unlock_sent = 0  # zero-thrust setpoints delivered to a listening robot
        self.events = EventLog()
        self.counts: dict[str, int] = {
            "action.nonfinite": 0,
            "action.bad_dim": 0,
            "state.bad_quaternion": 0,
            "limit.clip": 0,
            "limit.tilt": 0,
            "limit.rate": 0,
            "commands": 0,
        }
        self.commanders = CommanderWatch()

    # ----- inputs -----
    def on_state(self, state: dict, stamp: float, now: float) -> str | None:
        """Offer a state sample; returns the reason if it was dropped."""
        if not all(L.is_finite(v) for v in state.values()):
            return self._note(now, "input", self.state_in.reject_nonfinite())
        norm = float(np.linalg.norm(state["quaternion"]))
        if abs(norm - 1.0) > self.cfg.quaternion_norm_tol:
            self.counts["state.bad_quaternion"] += 1
            return self._note(now, "input", self.state_in.reject(f"quaternion norm {norm:.3f} is not 1"))
        why = self.state_in.accept(stamp, now)
        if why is not None:
            return self._note(now, "input", why)
        self.state = {k: np.asarray(v, dtype=np.float64) for k, v in state.items()}
        self._check_envelope(now)
        return None

    def on_neighbour(self, name: str, position, stamp: float, now: float) -> None:
        mon = self.neighbour_in.setdefault(
            name, InputMonitor(f"neighbour.{name}", self.cfg.state_max_age_s, self.cfg.state_max_future_s)
        )
        if L.is_finite(position) and mon.accept(stamp, now) is None:
            self.neighbours[name] = np.asarray(position, dtype=np.float64)

    def on_action(self, action, now: float) -> str | None:
        a = np.asarray(action, dtype=np.float64).reshape(-1)
        if a.shape != (self.cfg.action_dim,):
            self.counts["action.bad_dim"] += 1
            return self._fall(now, Mode.HOVER, f"policy action has {a.size} values, expected {self.cfg.action_dim}")
        if not L.is_finite(a):
            self.counts["action.nonfinite"] += 1
            return self._fall(now, Mode.HOVER, "policy action is not finite")
        self.action, self.action_time = a, now
        return None

    def on_command_publishers(self, now: float, topic: str, others: list[str], settling: str | None = None) -> None:
        """Who else publishes the robot's command topic (a graph query). Another commander is a fault: it
        blocks arming and, once armed, lands (the robot may be obeying it: no time to hover and wait)."""
        reason = self.commanders.update(topic, others, settling)
        if reason and self.mode == Mode.ACTIVE:
            self._fall(now, Mode.LAND, reason)
        elif reason:
            self._note(now, "fault", reason)

    def estop(self, now: float, reason: str) -> None:
        if self.mode != Mode.ESTOP:
            self._set(now, Mode.ESTOP, reason)

    def arm(self, now: float) -> str | None:
        """Try to (re-)arm; returns the blocking reason, or None when armed."""
        if self.mode == Mode.ESTOP:
            return "emergency stop is latched; restart the safety node"
        blockers = self.arm_blockers(now)
        if blockers:
            return "; ".join(blockers)
        self._set(now, Mode.ACTIVE, "armed")
        return None

    def arm_blockers(self, now: float) -> list[str]:
        out = list(self.prearm_problems)
        if self.commanders.blocker:
            out.append(self.commanders.blocker)
        if self.unlock_sent < self.cfg.unlock_setpoints:
            out.append(f"zero-thrust unlock setpoints sent: {self.unlock_sent}/{self.cfg.unlock_setpoints}")
        if not self.state_in.fresh(now):
            out.append(f"state not fresh (age {self.state_in.age(now):.2f} s)")
        if self.action_time is None or now - self.action_time > self.cfg.command_timeout_s:
            out.append("no fresh policy action")
        if self.state is not None:
            fence = L.geofence_violation(self.state["position"], self.cfg.limits.fence_low, self.cfg.limits.fence_high)
            if fence:
                out.append(fence)
        return out

    # ----- output -----
    def step(self, now: float) -> np.ndarray:
        """The command to send now (rpyt); also advances watchdogs and the fallback chain."""
        self._watchdogs(now)
        if self.mode == Mode.DISARMED and self.cfg.auto_arm and not self.arm_blockers(now):
            self.arm(now)
        fresh_state = self.state if self.state_in.fresh(now) else None
        if self.mode == Mode.ACTIVE:
            cmd = self._filter(self.action, now)
        elif self.mode == Mode.HOVER:
            cmd = self.fallback.hover(fresh_state, self.hover_z)
        elif self.mode == Mode.LAND:
            cmd = self.fallback.land(fresh_state)
        else:  # DISARMED streams zero thrust, which is also the firmware's thrust unlock
            cmd = MOTORS_OFF.copy()
            # counted by the caller once delivered (note_unlock_delivered): a setpoint sent before the
            # robot's subscriber exists is lost, and the firmware would then stay locked
        if self.mode in (Mode.HOVER, Mode.LAND):
            # Fallback commands still pass the box and tilt limits (not the rate limit: it would delay them).
            cmd, _ = L.clip_box(cmd, self.cfg.limits.low, self.cfg.limits.high)
            cmd, _ = L.limit_tilt(cmd, self.cfg.limits.max_tilt_deg)
        if not L.is_finite(cmd):  # cannot happen by construction; a NaN command must never leave
            cmd = MOTORS_OFF.copy()
        self.last_cmd, self.last_cmd_time = cmd, now
        self.counts["commands"] += 1
        return cmd

    def note_unlock_delivered(self, now: float) -> None:
        """The caller published a disarmed zero-thrust command to at least one subscriber.

        Counted only while the robot's state is fresh: a robot that is talking has its command
        subscriber up, so the setpoint really reached it (a subscriber count alone can be a logger).
        """
        if self.mode == Mode.DISARMED and self.state_in.fresh(now):
            self.unlock_sent += 1

    def _filter(self, action: np.ndarray, now: float) -> np.ndarray:
        lim = self.cfg.limits
        cmd, hit = L.clip_box(action, lim.low, lim.high)
        self.counts["limit.clip"] += hit
        cmd, hit = L.limit_tilt(cmd, lim.max_tilt_deg)
        self.counts["limit.tilt"] += hit
        dt = 0.0 if self.last_cmd_time is None else now - self.last_cmd_time
        prev = self.last_cmd if self.mode == Mode.ACTIVE else None
        cmd, hit = L.limit_rate(cmd, prev, dt, lim.max_rate)
        self.counts["limit.rate"] += hit
        return cmd

    # ----- mode logic -----
    def check(self, now: float) -> None:
        """Run the watchdogs and the fallback chain without producing a command."""
        self._watchdogs(now)

    def _watchdogs(self, now: float) -> None:
        if self.mode == Mode.ACTIVE:
            if not self.state_in.fresh(now):
                self._fall(
                    now,
                    Mode.HOVER,
                    f"state stale: {self.state_in.age(now) * 1e3:.0f} ms > {self.cfg.state_max_age_s * 1e3:.0f} ms",
                )
            elif self.action_time is None or now - self.action_time > self.cfg.command_timeout_s:
                age = float("inf") if self.action_time is None else now - self.action_time
                self._fall(
                    now,
                    Mode.HOVER,
                    f"policy command stale: {age * 1e3:.0f} ms > {self.cfg.command_timeout_s * 1e3:.0f} ms",
                )
            else:
                self._check_envelope(now)
        if self.mode == Mode.HOVER and now - self.mode_since > self.cfg.hover_timeout_s:
            self._fall(now, Mode.LAND, f"hover fallback held {self.cfg.hover_timeout_s:.1f} s")
        if self.mode == Mode.LAND:
            s = self.state if self.state_in.fresh(now) else None
            if s is not None and s["position"][2] < self.cfg.landed_z_m and abs(s["velocity"][2]) < 0.2:
                self._fall(now, Mode.MOTORS_OFF, "landed")
            elif now - self.mode_since > self.cfg.land_timeout_s:
                self._fall(now, Mode.MOTORS_OFF, f"land fallback exceeded {self.cfg.land_timeout_s:.1f} s")

    def _check_envelope(self, now: float) -> None:
        if self.state is None or self.mode not in (Mode.ACTIVE, Mode.HOVER, Mode.LAND):
            return
        lim = self.cfg.limits
        tilt = L.tilt_deg(self.state["quaternion"])
        if tilt > lim.state_tilt_tumble_deg:
            self._fall(
                now,
                Mode.MOTORS_OFF,
                f"attitude: tilt {tilt:.0f} deg > tumble {lim.state_tilt_tumble_deg:.0f} deg",
            )
            return
        fence = L.geofence_violation(
            self.state["position"],
            lim.fence_low,
            lim.fence_high,
            self.state["velocity"],
            lim.fence_brake_mps2,
            lim.fence_reaction_s,
        )
        if fence and self.mode != Mode.LAND:  # already landing: braking is what LAND does
            self._fall(now, Mode.LAND, fence)
        if tilt > lim.state_tilt_envelope_deg:
            self._fall(
                now,
                Mode.HOVER,
                f"attitude: tilt {tilt:.0f} deg > envelope {lim.state_tilt_envelope_deg:.0f} deg",
            )
        sep = L.separation_violation(self.state["position"], self._fresh_neighbours(now), lim.min_separation_m)
        if sep:
            self._fall(now, Mode.HOVER, sep)

    def _fresh_neighbours(self, now: float) -> dict[str, np.ndarray]:
        return {n: p for n, p in self.neighbours.items() if self.neighbour_in[n].fresh(now)}

    def _fall(self, now: float, mode: Mode, reason: str) -> str:
        # Only ever escalate; a fallback never returns to the policy without an explicit arm.
        if self.mode != Mode.DISARMED and mode > self.mode:
            self._set(now, mode, reason)
        else:
            self._note(now, "intervention", reason)
        return reason

    def _set(self, now: float, mode: Mode, reason: str) -> None:
        if mode == Mode.HOVER:
            self.hover_z = None if self.state is None else float(self.state["position"][2])
        self.mode, self.reason, self.mode_since = mode, reason, now
        self.events.append(Intervention(now, mode.name, reason))

    def _note(self, now: float, kind: str, reason: str) -> str:
        self.events.append(Intervention(now, kind, reason))
        return reason

    def counters(self) -> dict[str, int]:
        out = dict(self.counts)
        out.update(self.state_in.counters())
        out["command.second_publisher"] = self.commanders.checks_with_conflict
        return out
