"""Keypoint reward (KAGI): progress along the chosen keypoints as potential-based shaping, plus sparse success.

Per scene layout the guide gives a path: the grasp keypoint (attached to the object; the
end-effector must reach it), then waypoints of the object centre in the world frame, then the
target keypoint (attached to the destination; the object centre must rest on it). Each world keeps
the index k of its next path point; the potential is

    phi = (k + 1 - clip(d_k / D_k, 0, 1)) / K   in [0, 1]

(d_k: distance of the tracked point to point k, D_k: length of the segment into it), and the
progress term is w * (gamma * phi' - phi). Shaping of this form telescopes, so over an episode it
adds at most w * (gamma^T phi_T - phi_0) <= w: lingering next to the goal never pays more than the
sparse success term earns by finishing (Ng, Harada, Russell 1999).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from robot_conventions.options import FINITE, POSITIVE, option
from robot_rl.guidance.keypoint_selection import OBJECT_HALF_HEIGHT, KeypointGuide


@dataclass
class KeypointRewardWeights:
    progress: float = option(10.0, FINITE)
    success: float = option(2.0, FINITE)
    reach_radius: float = option(0.03, POSITIVE)  # m, end-effector to the grasp keypoint
    waypoint_radius: float = option(0.04, POSITIVE)  # m, object centre to a waypoint


def quat_to_rotmat(q: torch.Tensor) -> torch.Tensor:
    """(n, 4) wxyz -> (n, 3, 3)."""
    w, x, y, z = q.unbind(-1)
    return torch.stack(
        [
            1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
            2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
            2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
        ],
        dim=-1,
    ).reshape(*q.shape[:-1], 3, 3)  # fmt: skip


def body_point(task, body: torch.Tensor, local: torch.Tensor) -> torch.Tensor:
    """World position (n, 3) of a body-attached point per world of an arm task: objects are free bodies
    (pose from qpos), destinations static (per-world body_pos, no rotation)."""
    objs = task.scene_view().object_poses  # (n, n_objects, 7): position, quaternion wxyz
    match = body.unsqueeze(1) == task.object_body.unsqueeze(0)  # (n, n_objects)
    is_obj = match.any(dim=1)
    pose = objs[torch.arange(task.n), match.double().argmax(dim=1)]
    moving = pose[:, :3] + (quat_to_rotmat(pose[:, 3:7]) @ local.unsqueeze(-1)).squeeze(-1)
    static = task.body_pos[torch.arange(task.n), body].to(torch.float64) + local
    return torch.where(is_obj.unsqueeze(1), moving, static)


class KeypointReward:
    """Reward terms of an arm task from per-layout keypoint guides (the task must use a layout pool)."""

    def __init__(self, task, guides: Sequence[KeypointGuide], gamma: float, weights: KeypointRewardWeights):
        if task.pool is None:
            raise ValueError("keypoint rewards need a layout pool: set task.params.layouts > 0")
        if len(guides) != task.layouts:
            raise ValueError(f"{len(guides)} keypoint guides for {task.layouts} layouts")
        self.task, self.gamma, self.w = task, float(gamma), weights
        f64 = dict(dtype=torch.float64)
        self.grasp_body = torch.tensor([g.grasp_body for g in guides])
        self.grasp_local = torch.tensor([g.grasp_local.tolist() for g in guides], **f64)
        self.target_body = torch.tensor([g.target_body for g in guides])
        self.target_local = torch.tensor([g.target_local.tolist() for g in guides], **f64)
        kmax = max(len(g.waypoints) for g in guides)
        self.n_wp = torch.tensor([len(g.waypoints) for g in guides])
        self.wp = torch.zeros(len(guides), max(kmax, 1), 3, **f64)
        for i, g in enumerate(guides):
            if len(g.waypoints):
                self.wp[i, : len(g.waypoints)] = torch.as_tensor(g.waypoints, **f64)
        n = task.n
        self.k = torch.zeros(n, dtype=torch.long)  # next path point per world
        self.seg = torch.ones(n, **f64)  # length of the segment into point k
        self.phi = torch.zeros(n, **f64)
        self.obj_start = torch.zeros(n, 3, **f64)
        self.reset(torch.arange(n))

    # -- geometry --------------------------------------------------------------------------------
    def _object_centre(self, body: torch.Tensor) -> torch.Tensor:
        return body_point(self.task, body, torch.zeros(len(body), 3, dtype=torch.float64))

    def path_point(self, k: torch.Tensor) -> torch.Tensor:
        """Point k of each world's path (n, 3): grasp keypoint, waypoints, then the target keypoint."""
        lay = self.task.layout_id
        grasp = body_point(self.task, self.grasp_body[lay], self.grasp_local[lay])
        target = body_point(self.task, self.target_body[lay], self.target_local[lay])
        target = target + torch.tensor([0.0, 0.0, OBJECT_HALF_HEIGHT], dtype=torch.float64)
        wp = self.wp[lay, (k - 1).clamp(0, self.wp.shape[1] - 1)]
        last = self.n_wp[lay] + 1
        return torch.where((k == 0).unsqueeze(1), grasp, torch.where((k >= last).unsqueeze(1), target, wp))

    def tracked(self) -> torch.Tensor:
        """End-effector before the grasp keypoint is reached, the grasped object's centre after."""
        obj = self._object_centre(self.grasp_body[self.task.layout_id])
        return torch.where((self.k == 0).unsqueeze(1), self.task.tcp_pos, obj)

    def _potential(self) -> torch.Tensor:
        n_points = (self.n_wp[self.task.layout_id] + 2).double()
        d = (self.tracked() - self.path_point(self.k)).norm(dim=1)
        return (self.k.double() + 1.0 - (d / self.seg).clamp(0.0, 1.0)) / n_points

    def _advance(self) -> None:
        last = self.n_wp[self.task.layout_id] + 1
        point = self.path_point(self.k)
        d = (self.tracked() - point).norm(dim=1)
        radius = torch.where(self.k == 0, self.w.reach_radius, self.w.waypoint_radius)
        go = (d < radius) & (self.k < last)
        if go.any():
            prev = torch.where((self.k == 0).unsqueeze(1), self.obj_start, point)
            self.k = self.k + go.long()
            seg = (self.path_point(self.k) - prev).norm(dim=1).clamp(min=0.02)
            self.seg = torch.where(go, seg, self.seg)

    # -- env hooks -------------------------------------------------------------------------------
    def reset(self, ids: torch.Tensor) -> None:
        """After the task reset these worlds: start the path again."""
        self.k[ids] = 0
        self.obj_start[ids] = self._object_centre(self.grasp_body[self.task.layout_id])[ids]
        d0 = (self.task.tcp_pos - self.path_point(self.k)).norm(dim=1)
        self.seg[ids] = d0[ids].clamp(min=0.05)
        self.phi[ids] = self._potential()[ids]

    def terms(self) -> dict[str, torch.Tensor]:
        t = self.task
        self._advance()
        phi = self._potential()
        progress = self.w.progress * (self.gamma * phi - self.phi)
        self.phi = phi
        return {
            "keypoint_progress": progress,
            "success": self.w.success * t.success_now().double(),
            **t._penalties(t.rewards),
            "drop": t.rewards.drop * t.dropped.double(),
        }
