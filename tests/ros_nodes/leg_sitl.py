"""Quadruped SITL checks the leg tests share: the limits the running leg safety node enforces (its own parameters,
read back over its parameter service, and the bundle's servo gains it sends), every recorded joint command checked
against them, and the policy killed with the DAMP fallback awaited."""

from __future__ import annotations

import signal
import time
from collections import Counter

import numpy as np

# What the leg safety node enforces on a command (robot_rl_ros.leg_safety_node.PARAMS) and its watchdog timing.
ENFORCED = ("q_low", "q_high", "max_lead", "max_speed", "damping_kd", "command_timeout_s", "watchdog_rate_hz")


def safety_parameters(obs, names=ENFORCED, node: str = "safety", timeout_s: float = 20.0) -> dict:
    """The values the running safety node (in the observer's namespace) declared, from its parameter service:
    lists as arrays."""
    from rcl_interfaces.srv import GetParameters
    from rclpy.parameter import parameter_value_to_python

    client = obs.node.create_client(GetParameters, f"{node}/get_parameters")
    if not obs.spin_until(client.service_is_ready, timeout_s):
        raise RuntimeError(f"no parameter service from {node} within {timeout_s:.0f} s")
    # A service is "ready" once its request reader is matched; a request sent before the server has matched our
    # response reader gets an answer that is never delivered (a DDS discovery race, more likely on a loaded
    # machine: a CI run waited 20 s on one). So a request unanswered for 2 s is sent again.
    deadline = time.monotonic() + timeout_s
    while True:
        fut = client.call_async(GetParameters.Request(names=list(names)))
        if obs.spin_until(fut.done, min(2.0, max(0.0, deadline - time.monotonic()))):
            break
        client.remove_pending_request(fut)
        if time.monotonic() >= deadline:
            raise RuntimeError(f"{node} did not answer get_parameters within {timeout_s:.0f} s")
    values = [parameter_value_to_python(v) for v in fut.result().values]
    arrays = {
        k: np.asarray(v, dtype=np.float64) if isinstance(v, list) else v for k, v in zip(names, values, strict=True)
    }
    return arrays


def bundle_servo(bundle_dir) -> tuple[np.ndarray, np.ndarray, float]:
    """What the leg safety node takes from the bundle: the per-motor kp, kd it sends while it commands stiffness
    (extra.servo, one value for all motors or one per motor), and the control period (s)."""
    from robot_rl.deploy import load_bundle

    b = load_bundle(bundle_dir)
    kp, kd = (np.broadcast_to(np.asarray(b.extra["servo"][k], dtype=np.float64), (12,)).copy() for k in ("kp", "kd"))
    return kp, kd, 1.0 / b.control_rate_hz


class LegInputs:
    """Records, on an Observer's node, what the leg safety node reads: joint_states by stamp and the DDS arrival
    of every policy/action (for the observer's arrival_times)."""

    def __init__(self, obs):
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from robot_rl_ros import qos
        from robot_rl_ros.msgs import LEG_JOINT_NAMES, joint_arrays, stamp_to_s
        from sensor_msgs.msg import JointState

        self.joints: dict[float, np.ndarray] = {}
        self.action_received_ns: list[int] = []

        def on_joints(m):
            self.joints[stamp_to_s(m.header.stamp)] = joint_arrays(m, LEG_JOINT_NAMES)[0]

        def on_action(m, info):
            self.action_received_ns.append(int(info["received_timestamp"]))

        # the bridge's best-effort state, queued deep enough that a stalled test process drops none
        deep = QoSProfile(depth=500, reliability=ReliabilityPolicy.BEST_EFFORT)
        obs.node.create_subscription(JointState, "joint_states", on_joints, deep)
        obs.node.create_subscription(JointState, "policy/action", on_action, qos.RECORD)


def kill_policy_until_damp(graph, obs, timeout_s: float = 30.0) -> tuple[float, float, str]:
    """SIGKILL the policy node and spin until the safety node reports DAMP: (observer's time at the kill, time
    the DAMP mode message arrived, that message)."""
    graph.stop("policy", sig=signal.SIGKILL)
    t_kill = obs.now()
    if not obs.spin_until(lambda: any(m.startswith("DAMP") for _, m in obs.modes), timeout_s):
        raise AssertionError(f"no DAMP within {timeout_s:.0f} s of killing the policy: {obs.modes}")
    t_damp, mode = next((t, m) for t, m in obs.modes if m.startswith("DAMP"))
    return t_kill, t_damp, mode


def check_leg_commands(obs, inputs: LegInputs, p: dict, bundle_dir) -> dict:
    """Every joint command the observer recorded (12 targets, 12 kp, 12 kd) against what the safety node enforces:
    a command with stiffness carries exactly the bundle's gains, targets inside [q_low, q_high], within max_lead of
    the joints the node had measured and, after the previous command with stiffness, moved at most max_speed times
    the simulated time between them; a command without stiffness is pure damping (kp 0, kd damping_kd).

    A command's simulated time is the control step its DDS arrival falls in (the observer's arrival_times), which
    lands a step off now and then (the observer's /clock and command readers race each other): the joints
    the node had are the state at that step, the one before (the node may read the action first) or the one after,
    and the lead is the smallest against these three; the time between two commands is at least one control step
    (in lock step each command advances the simulation by one), and one step more at each end whose step is in
    doubt (two commands in one step, or a step beside it with a state and no command). Commands before the
    observer's first /clock (time 0) are checked for gains and joint limits only. Returns the violations (one line
    each, at most 20) and the margins measured."""
    kp, kd, control_dt = bundle_servo(bundle_dir)
    t = obs.arrival_times(obs.command_received_ns)
    c = np.array([x for _, _, x in obs.commands], dtype=np.float64).reshape(-1, 36)
    q, g_kp, g_kd = c[:, :12], c[:, 12:24], c[:, 24:]
    stiff = np.any(g_kp != 0.0, axis=1)
    bad: list[str] = []

    def flag(mask, what):
        bad.extend(f"command {i} (t={t[i]:.3f} s): {what}" for i in np.flatnonzero(mask))

    flag(~np.all(np.isfinite(c), axis=1), "not finite")
    flag(stiff & ~(np.all(g_kp == kp, axis=1) & np.all(g_kd == kd, axis=1)), "gains are not the bundle's servo gains")
    flag(~stiff & ~np.all(g_kd == p["damping_kd"], axis=1), f"zero kp without kd = damping_kd {p['damping_kd']}")
    low, high = q < p["q_low"], q > p["q_high"]
    flag(stiff & np.any(low | high, axis=1), "target outside [q_low, q_high]")

    stamps = np.array(sorted(inputs.joints))
    lead_ratio, lead_checked = [], 0
    for i in np.flatnonzero(stiff & (t > 0)):
        near = stamps[np.abs(stamps - t[i]) <= 1.5 * control_dt]
        seen = [inputs.joints[s] for s in near]
        if not seen:
            continue
        lead_checked += 1
        ratio = min(float(np.max(np.abs(q[i] - m) / p["max_lead"])) for m in seen)
        lead_ratio.append(ratio)
        if ratio > 1.0 + 1e-9:
            bad.append(f"command {i} (t={t[i]:.3f} s): target leads the measured joints by {ratio:.2f} x max_lead")

    # Where the observer's step of a command is in doubt it may be one off either way: a step with a state and no
    # command, or two commands in one step, says an arrival landed in its neighbour. There the pair's time is the
    # widest its commands allow; where every step holds one command it is the observed one.
    steps = np.round(t / control_dt).astype(np.int64)
    per_step = Counter(steps.tolist())
    state_steps = set(np.round(stamps / control_dt).astype(np.int64).tolist())

    def doubtful(k: int) -> bool:
        return per_step[k] > 1 or (k in state_steps and per_step[k] == 0)

    speed_ratio, widened = [], 0
    idx = np.flatnonzero(stiff & (t > 0))
    for a, b in zip(idx[:-1], idx[1:], strict=True):
        ka, kb = int(steps[a]), int(steps[b])
        first = ka - 1 if doubtful(ka) or doubtful(ka - 1) else ka
        last = kb + 1 if doubtful(kb) or doubtful(kb + 1) else kb
        widened += (first, last) != (ka, kb)
        dt = max((last - first) * control_dt, control_dt)
        ratio = float(np.max(np.abs(q[b] - q[a]) / (p["max_speed"] * dt)))
        speed_ratio.append(ratio)
        if ratio > 1.0 + 1e-9:
            bad.append(f"commands {a}->{b} (dt {dt:.3f} s): target speed {ratio:.2f} x max_speed")

    with_kp = q[stiff]
    return {
        "violations": bad[:20],
        "n_violations": len(bad),
        "commands": len(c),
        "with_stiffness": int(stiff.sum()),
        "damping_only": int((~stiff).sum()),
        "lead_checked": lead_checked,
        "max_lead_ratio": max(lead_ratio, default=0.0),
        "speed_pairs": len(speed_ratio),
        "speed_pairs_in_doubt": widened,
        "max_speed_ratio": max(speed_ratio, default=0.0),
        # smallest distance (rad) of a stiff target to its joint limit; 0 where the node clipped
        "min_limit_margin_rad": float(np.min(np.minimum(with_kp - p["q_low"], p["q_high"] - with_kp)))
        if len(with_kp)
        else float("nan"),
    }
