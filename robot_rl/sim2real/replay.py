"""Where simulation and a flight log part: open-loop prediction error over horizons, and the policy flown closed
loop in simulation from the log's start against what the robot did.

Open loop: from window starts along the log, the logged commands are flown from the logged state (the same
predictions sysid fits, sim.crazyflie_replay) and the position error after each horizon is summarised per axis.
Closed loop: the bundle flies the simulated drone from the log's first state towards the logged goals; the two
trajectories are compared at the log's stamps.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robot_rl.sim2real.crazyflie_sysid import smoothed_states, window_starts
from robot_rl.sim2real.flight_log import FlightLog
from sim.crazyflie_replay import CrazyflieReplay
from sim.tasks.crazyflie.physical import CrazyflieParams

HORIZONS_S = (0.1, 0.5, 1.0)
AXES = ("x", "y", "z")


@dataclass
class OpenLoopErrors:
    """Per horizon and axis: median and 90th percentile of |position error| over the windows (m)."""

    label: str
    horizons_s: tuple[float, ...]
    median_m: np.ndarray  # (horizons, 3)
    p90_m: np.ndarray  # (horizons, 3)
    windows: int
    starts_s: np.ndarray  # (K,) window starts on the log's clock
    predicted: np.ndarray  # (K, H, 3) open-loop positions from each start, for the overlay

    @classmethod
    def of(cls, label: str, horizons_s, steps: list[int], err: np.ndarray, starts_s: np.ndarray,
           predicted: np.ndarray) -> OpenLoopErrors:  # fmt: skip
        """From |errors| (K windows, H steps, 3 axes): statistics after each horizon of `steps` steps."""
        at = np.array(steps) - 1
        return cls(label, tuple(horizons_s), np.median(err[:, at], axis=0), np.percentile(err[:, at], 90, axis=0),
                   len(starts_s), starts_s, predicted)  # fmt: skip

    def as_dict(self) -> dict:
        return {
            "label": self.label,
            "horizons_s": list(self.horizons_s),
            "median_m": self.median_m.round(5).tolist(),
            "p90_m": self.p90_m.round(5).tolist(),
            "windows": self.windows,
            "starts_s": self.starts_s.round(4).tolist(),
            "predicted": self.predicted.round(4).tolist(),
        }


def open_loop_errors(
    log: FlightLog,
    params: CrazyflieParams,
    label: str,
    horizons_s: tuple[float, ...] = HORIZONS_S,
    stride_s: float = 0.5,
    replay: CrazyflieReplay | None = None,
) -> OpenLoopErrors:
    steps = [max(1, round(h / 0.01)) for h in horizons_s]
    horizon = max(steps)
    starts = window_starts(log, horizon, max(1, round(stride_s / 0.01)))
    if not len(starts):
        raise ValueError(f"{log.source}: no {horizon * 0.01:.1f} s stretch airborne without drops to replay")
    replay = replay or CrazyflieReplay()
    values = {k: np.array([v]) for k, v in params.as_dict().items()}
    pred = replay.predict(values, smoothed_states(log), log.commands, starts, horizon)["position"][0]
    truth = log.position[starts[:, None] + np.arange(1, horizon + 1)[None, :]]
    return OpenLoopErrors.of(label, horizons_s, steps, np.abs(pred - truth), log.t[starts], pred)


def closed_loop(log: FlightLog, bundle_dir: Path, params: CrazyflieParams) -> dict:
    """The bundle flown in simulation from the log's first state under the logged goals: both trajectories and
    the per-axis RMS difference."""
    from robot_rl.deploy import PolicyRuntime
    from sim.crazyflie_sitl import CrazyflieSitl

    runtime = PolicyRuntime(bundle_dir)
    goals = log.goal if log.goal is not None else np.tile([0.0, 0.0, 1.0], (len(log.t), 1))
    # from the first thrust the robot was given: before it the safety node held the motors (pre-arm checks)
    flying = np.flatnonzero(log.commanded & (log.commands[:, 3] > 0))
    k0 = int(flying[0]) if len(flying) else 0
    sim = CrazyflieSitl(goal=tuple(goals[k0]), physical=params.as_dict())
    sim.reset(position=tuple(log.position[k0]))
    positions = np.empty((len(log.t) - k0, 3))
    for k in range(k0, len(log.t)):
        raw = sim.state()
        positions[k - k0] = raw["position"]
        raw["goal"] = goals[k]
        sim.step(runtime.act(raw))
    diff = positions - log.position[k0:]
    return {
        "t": log.t[k0:].round(4).tolist(),
        "sim_position": positions.round(4).tolist(),
        "rms_m": dict(zip(AXES, np.sqrt(np.mean(diff**2, axis=0)).round(5).tolist(), strict=True)),
        "crashed": bool(sim.crashed),
    }


def closed_loop_start(log, skip_s: float) -> int:
    """The step a joint-space robot's closed-loop replay starts from: skip_s after the log's first command (before
    it, and for a while after, the safety node held the robot on its own timer)."""
    k0 = int(np.searchsorted(log.t, log.t[int(np.argmax(log.commanded))] + skip_s - 1e-9))
    if not log.commanded.any() or k0 >= len(log.t) - 1:
        raise ValueError(f"{log.source}: no commanded stretch to replay closed loop")
    return k0


def observed_inputs(runtime) -> set[str]:
    """The raw inputs a bundle's observation reads (a PolicyRuntime's)."""
    return {key for term in runtime.bundle.observation for key in term.inputs}


def error_table(results: list[OpenLoopErrors]) -> str:
    """The open-loop error table `robot-rl replay` prints: one row per model and horizon."""
    head = f"{'model':<12}{'horizon':>8}" + "".join(f"{'|e' + a + '| median':>14}{'p90':>10}" for a in AXES)
    rows = [head, "-" * len(head)]
    for r in results:
        for i, h in enumerate(r.horizons_s):
            cells = "".join(f"{r.median_m[i, j] * 100:>12.2f}cm{r.p90_m[i, j] * 100:>8.2f}cm" for j in range(3))
            rows.append(f"{r.label:<12}{h:>7.1f}s{cells}")
    return "\n".join(rows)
