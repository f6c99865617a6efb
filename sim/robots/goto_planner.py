"""Go-to setpoints for Crazyflie teams, a geometric tracking controller, and a CBF safety filter.

- MinJerkGoto: a minimum-jerk (5th-order, zero velocity and acceleration at both ends) straight-line
  go-to per drone, the same family as the on-board high-level commander's go_to (which uses a
  7th-order polynomial); it gives the moving setpoint (position, velocity, acceleration) the
  policy tracks.
- accel_to_motors: desired acceleration -> normalized motor commands (the task's `motors` action
  units), an SE(3) geometric controller and the Crazyflie mixer. Classical baselines fly with it,
  and the safety guide of the two-stage training compares the policy's action with it.
- cbf_filter: the closest acceleration to a nominal one that keeps second-order barrier functions
  of obstacle and neighbour distances non-negative, solved batched by projected gradient on the
  QP's dual (no QP library needed, fixed iterations so it batches).
Tensors are (W, N, ...) : worlds x drones.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from robot_conventions.units import GRAVITY

ARM = 0.0325  # m per axis, motor offset from the centre (crazyflie.xml)
TORQUE_RATIO = (-0.006, 0.006, -0.006, 0.006)  # yaw torque per newton, m1..m4 (gear[5])
MOTOR_MAX_N = 0.15  # thrust of a normalized command of 1 (task motors mode)


@dataclass
class MinJerkGoto:
    """Straight-line min-jerk trajectories, one per drone; durations from a mean speed."""

    start: torch.Tensor  # (W, N, 3)
    goal: torch.Tensor  # (W, N, 3)
    duration: torch.Tensor  # (W, N) s

    @staticmethod
    def plan(start: torch.Tensor, goal: torch.Tensor, mean_speed: torch.Tensor, min_duration: float = 1.0):
        dist = (goal - start).norm(dim=-1)
        return MinJerkGoto(start.clone(), goal.clone(), (dist / mean_speed).clamp(min=min_duration))

    def replan(
        self,
        ids: torch.Tensor,
        start: torch.Tensor,
        goal: torch.Tensor,
        mean_speed: torch.Tensor,
        min_duration: float = 1.0,
    ) -> None:
        self.start[ids], self.goal[ids] = start, goal
        self.duration[ids] = ((goal - start).norm(dim=-1) / mean_speed).clamp(min=min_duration)

    def setpoint(self, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Position, velocity, acceleration at times t (W,) since the plan started; holds at the goal."""
        T = self.duration
        tau = (t.unsqueeze(1) / T).clamp(0.0, 1.0)
        s = tau**3 * (10 - 15 * tau + 6 * tau**2)
        ds = 30 * tau**2 * (1 - tau) ** 2 / T
        dds = 60 * tau * (1 - tau) * (1 - 2 * tau) / T**2
        delta = self.goal - self.start
        return self.start + s.unsqueeze(-1) * delta, ds.unsqueeze(-1) * delta, dds.unsqueeze(-1) * delta


@dataclass
class TrackingGains:
    kp: float = 6.0
    kd: float = 4.0
    max_acc: float = 6.0  # m/s^2, horizontal and vertical command limit
    k_att: float = 7e-3  # N m / rad   (about 20 rad/s with the nominal inertia)
    k_rate: float = 5e-4  # N m s / rad


def tracking_acceleration(pos, vel, sp_pos, sp_vel, sp_acc, g: TrackingGains) -> torch.Tensor:
    return sp_acc + g.kp * (sp_pos - pos) + g.kd * (sp_vel - vel)


def _mixer_inverse(dtype, device) -> torch.Tensor:
    x = torch.tensor([ARM, -ARM, -ARM, ARM], dtype=dtype, device=device)
    y = torch.tensor([-ARM, -ARM, ARM, ARM], dtype=dtype, device=device)
    mix = torch.stack(
        [torch.ones(4, dtype=dtype, device=device), y, -x, torch.tensor(TORQUE_RATIO, dtype=dtype, device=device)]
    )
    return torch.linalg.inv(mix)  # [thrust, tau_x, tau_y, tau_z] -> motor newtons


def accel_to_motors(
    acc: torch.Tensor,
    rot: torch.Tensor,
    omega: torch.Tensor,
    mass: float | torch.Tensor,
    g: TrackingGains,
    kf_scale: torch.Tensor | float = 1.0,
) -> torch.Tensor:
    """Desired world acceleration (W, N, 3), attitude (W, N, 3, 3), body rates (W, N, 3) -> motor commands in [0, 1].

    Yaw is held at zero. kf_scale: the motors' thrust multiplier if known (1: nominal).
    """
    acc = acc.clamp(-g.max_acc, g.max_acc)
    force = torch.as_tensor(mass, dtype=acc.dtype, device=acc.device).unsqueeze(-1) * (
        acc + torch.tensor([0.0, 0.0, GRAVITY], dtype=acc.dtype, device=acc.device)
    )
    b3 = force / force.norm(dim=-1, keepdim=True).clamp(min=1e-6)
    b1c = torch.zeros_like(b3)
    b1c[..., 0] = 1.0
    b2 = torch.linalg.cross(b3, b1c)
    b2 = b2 / b2.norm(dim=-1, keepdim=True).clamp(min=1e-6)
    rd = torch.stack([torch.linalg.cross(b2, b3), b2, b3], dim=-1)  # columns b1, b2, b3
    e = 0.5 * (rd.transpose(-1, -2) @ rot - rot.transpose(-1, -2) @ rd)
    e_rot = torch.stack([e[..., 2, 1], e[..., 0, 2], e[..., 1, 0]], dim=-1)
    torque = -g.k_att * e_rot - g.k_rate * omega
    thrust = (force * rot[..., :, 2]).sum(-1, keepdim=True)
    wrench = torch.cat([thrust, torque], dim=-1)
    motors_n = wrench @ _mixer_inverse(acc.dtype, acc.device).T
    kf = torch.as_tensor(kf_scale, dtype=acc.dtype, device=acc.device)
    kf = kf.unsqueeze(-1) if kf.dim() else kf  # (W, N) -> (W, N, 1)
    return (motors_n / (MOTOR_MAX_N * kf)).clamp(0.0, 1.0)


@dataclass
class CbfParams:
    safe_distance: float = 0.12  # m, obstacle surface to drone centre (the propeller box is 0.056)
    neighbour_distance: float = 0.25  # m, centre to centre
    k0: float = 4.0  # class-K gains of the second-order barrier: h'' + k1 h' + k0 h >= 0
    k1: float = 4.0
    sensing_range: float = 1.5  # constraints only for obstacles / neighbours nearer than this
    max_constraints: int = 8
    iterations: int = 40


def cbf_filter(
    u_nom: torch.Tensor, dist: torch.Tensor, normal: torch.Tensor, rel_vel: torch.Tensor, p: CbfParams, max_acc: float
) -> torch.Tensor:
    """Filter horizontal accelerations u_nom (W, N, 2) against barrier constraints.

    dist (W, N, K): barrier distances h (already minus the safety distance); normal (W, N, K, 2): unit
    vectors from the obstacle to the drone; rel_vel (W, N, K, 2): drone velocity minus the obstacle's.
    For h = d - D with a fixed normal, h' = n.v and h'' ~ n.u (minus the other party's acceleration,
    taken as zero), so each constraint is n.u >= -k1 n.v - k0 h. Only the nearest max_constraints
    within sensing_range count. Returns the filtered accelerations (W, N, 2).
    """
    k = min(p.max_constraints, dist.shape[-1])
    d, idx = torch.topk(dist, k, dim=-1, largest=False)
    n = torch.gather(normal, 2, idx.unsqueeze(-1).expand(*idx.shape, 2))
    rv = torch.gather(rel_vel, 2, idx.unsqueeze(-1).expand(*idx.shape, 2))
    active = (d < p.sensing_range).to(u_nom.dtype)
    b = (-p.k1 * (n * rv).sum(-1) - p.k0 * d.clamp(max=p.sensing_range)) * active  # (W, N, k)
    a = n * active.unsqueeze(-1)
    # dual projected gradient: u = u_nom + A^T lam, maximise over lam >= 0; step 1/k bounds ||A A^T||
    lam = torch.zeros_like(b)
    for _ in range(p.iterations):
        u = u_nom + (a * lam.unsqueeze(-1)).sum(2)
        viol = b - (a * u.unsqueeze(2)).sum(-1)
        lam = (lam + viol / k).clamp(min=0.0)
    u = u_nom + (a * lam.unsqueeze(-1)).sum(2)
    return u.clamp(-max_acc, max_acc)
