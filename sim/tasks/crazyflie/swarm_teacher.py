"""The swarm's scripted expert: the go-to planner's command, CBF-filtered against obstacles and neighbours.

CbfTeacher is mixed into CrazyflieSwarm. It holds the scene geometry the barriers (and the task's contact
status) are built on, and the two teachers: safe_command on the true geometry (stage 1's safety guide) and
sensed_safe_command on what the policy senses (the DAgger warm start's default).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

import torch

from sim.robots.goto_planner import accel_to_motors, cbf_filter, tracking_acceleration
from sim.scenes.clutter import obstacle_distance
from sim.sensors.tof import quat_wxyz_to_rotmat

if TYPE_CHECKING:
    from sim.robots.goto_planner import CbfParams, TrackingGains
    from sim.scenes.clutter import ClutterConfig, Layout
    from sim.sensors.tof import RangeSensors


class CbfTeacher:
    """Teachers and scene geometry of a swarm task; the task provides the state annotated here."""

    name: str
    num_drones: int
    scene: ClutterConfig
    layout: Layout
    sensors: RangeSensors
    tof: torch.Tensor  # (W, N, beams) held ToF readings
    pos: torch.Tensor  # (W, N, 3) each, world frame
    vel: torch.Tensor
    quat: torch.Tensor  # (W, N, 4) wxyz
    omega: torch.Tensor
    sp_pos: torch.Tensor  # the planner's setpoint (W, N, 3) each
    sp_vel: torch.Tensor
    sp_acc: torch.Tensor
    mass: torch.Tensor  # (W, N)
    kf_scale: torch.Tensor
    gains: TrackingGains
    cbf: CbfParams
    _observed_neighbours: Callable[[torch.Tensor], torch.Tensor]  # own (W, N, 6) -> (W, N, k, 6) [dp, dv]

    TEACHERS: ClassVar[tuple[str, ...]] = ("sensed_safe_command", "safe_command")

    def teacher(self, name: str) -> torch.Tensor:
        if name not in self.TEACHERS:
            raise ValueError(f"task '{self.name}' has no teacher '{name}' (teachers: {', '.join(self.TEACHERS)})")
        motors = self.safe_command() if name == "safe_command" else self.sensed_safe_command()
        return 2.0 * motors - 1.0  # policy units: the inverse of command(a) = 0.5 + 0.5 a

    def obstacle_geometry(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Horizontal surface distance (W, N, K) and outward normals (W, N, K, 2) to every obstacle slot,
        including the room walls as four extra obstacles."""
        p = self.pos[..., 0:2]
        dist, normal = obstacle_distance(self.layout, p, self.scene.wall_thickness, self.scene.column_diameter / 2)
        lx, ly = self.scene.room[0] / 2, self.scene.room[1] / 2
        room_d = torch.stack([lx - p[..., 0], p[..., 0] + lx, ly - p[..., 1], p[..., 1] + ly], dim=-1)
        room_n = torch.tensor([[-1.0, 0], [1, 0], [0, -1], [0, 1]], dtype=p.dtype, device=p.device).expand(
            *p.shape[:2], 4, 2
        )
        return torch.cat([dist, room_d], -1), torch.cat([normal, room_n], 2)

    def neighbour_geometry(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """True centre distances (W, N, N) (inf on the diagonal), unit vectors from j to i, and v_i - v_j."""
        p, v = self.pos, self.vel
        dp = p.unsqueeze(2) - p.unsqueeze(1)
        d = dp.norm(dim=-1) + torch.diag(torch.full((self.num_drones,), math.inf, dtype=p.dtype, device=p.device))
        return d, dp / d.clamp(min=1e-9).unsqueeze(-1), v.unsqueeze(2) - v.unsqueeze(1)

    def safe_command(self) -> torch.Tensor:
        """The CBF-filtered planner command in motor units (W, N, 4): stage 1's safety guide. The barriers use
        the true geometry: every obstacle surface and the true neighbour states."""
        d_obs, n_obs = self.obstacle_geometry()
        d_nb, n_nb, dv = self.neighbour_geometry()
        return self._cbf_command(d_obs, n_obs, d_nb, n_nb[..., 0:2], dv[..., 0:2])

    def sensed_safe_command(self) -> torch.Tensor:
        """The same CBF-filtered planner command (W, N, 4), its barriers built only from what the policy
        senses: one obstacle barrier per horizontal ToF beam (the held, noisy reading along the beam, normal
        against the beam; a beam at the clip value sees nothing) and one per observed neighbour (the k nearest
        delayed broadcasts). A teacher a ToF-only student can imitate: safe_command() reacts to obstacles in
        the deck's blind diagonals and to neighbours' true states, which no policy observation holds."""
        s = self.sensors
        flat = torch.cos(s.pitch) > 0.7  # horizontal beams (the Multi-ranger's up beam says nothing here)
        body = torch.stack([torch.cos(s.yaw), torch.sin(s.yaw), torch.zeros_like(s.yaw)], -1)
        u = torch.einsum("wnij,bj->wnbi", quat_wxyz_to_rotmat(self.quat), body)[..., 0:2]
        n_obs = -u / u.norm(dim=-1, keepdim=True).clamp(min=1e-6)
        seen = (self.tof < s.cfg.clip) & flat
        d_obs = torch.where(seen, self.tof + s.cfg.mount_radius, math.inf)  # centre to surface along the beam
        nb = self._observed_neighbours(torch.cat([self.pos, self.vel], -1))
        d_nb = nb[..., 0:3].norm(dim=-1)
        n_nb = -nb[..., 0:2] / d_nb.unsqueeze(-1).clamp(min=1e-9)  # from the neighbour to this drone
        return self._cbf_command(d_obs, n_obs, d_nb, n_nb, -nb[..., 3:5])

    def _cbf_command(self, d_obs, n_obs, d_nb, n_nb, dv) -> torch.Tensor:
        """Tracking acceleration, CBF-filtered against obstacle surfaces d_obs (W, N, K) with normals n_obs
        (W, N, K, 2) and neighbours at centre distances d_nb (W, N, J), normals n_nb and velocity v_i - v_j dv
        (W, N, J, 2); then the geometric controller -> motor units (W, N, 4)."""
        acc = tracking_acceleration(self.pos, self.vel, self.sp_pos, self.sp_vel, self.sp_acc, self.gains)
        dist = torch.cat([d_obs - self.cbf.safe_distance, d_nb - self.cbf.neighbour_distance], -1)
        normal = torch.cat([n_obs, n_nb], 2)
        rel_v = torch.cat([self.vel[..., 0:2].unsqueeze(2).expand(*n_obs.shape), dv], 2)
        acc = acc.clone()
        acc[..., 0:2] = cbf_filter(acc[..., 0:2], dist, normal, rel_v, self.cbf, self.gains.max_acc)
        rot = quat_wxyz_to_rotmat(self.quat)
        return accel_to_motors(acc, rot, self.omega, self.mass, self.gains, self.kf_scale)
