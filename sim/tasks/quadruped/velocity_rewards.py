"""The quadruped velocity task's reward terms (legged_gym's set), one function over the task's state."""

from __future__ import annotations

import torch

from sim.tasks.base import Task
from sim.tasks.quadruped.constants import CALVES


def velocity_reward_terms(task: Task) -> dict[str, torch.Tensor]:
    """QuadrupedVelocity's named reward terms, each weighted and scaled by the control period (the fall
    penalty is not scaled). Typed as Task: velocity.py imports this module."""
    w, b, dt = task.rewards, task.backend, task.control_dt
    lin, ang, gravity = task.lin_vel, task.ang_vel, task.gravity
    q = b.qpos[:, 7:]
    # steps longer than 0.5 s pay, shorter ones cost; only when asked to move
    air = ((task.step_air_time - 0.5) * task.touchdown).sum(dim=1) * (task.command[:, :2].norm(dim=1) > 0.1)
    torque = b.derived("actuator_force")
    soft_low, soft_high = task.soft_low, task.soft_high
    terms = {
        "tracking_lin_vel": w.tracking_lin_vel
        * torch.exp(-((task.command[:, :2] - lin[:, :2]) ** 2).sum(dim=1) / task.tracking_sigma),
        "tracking_ang_vel": w.tracking_ang_vel * torch.exp(-((task.command[:, 2] - ang[:, 2]) ** 2)
                                                           / task.tracking_sigma),
        "lin_vel_z": w.lin_vel_z * lin[:, 2] ** 2,
        "ang_vel_xy": w.ang_vel_xy * (ang[:, :2] ** 2).sum(dim=1),
        "orientation": w.orientation * (gravity[:, :2] ** 2).sum(dim=1),
        "torques": w.torques * (torque**2).sum(dim=1),
        "joint_acc": w.joint_acc * (((b.qvel[:, 6:] - task.last_qvel) / dt) ** 2).sum(dim=1),
        "action_rate": w.action_rate * ((task.action - task.prev_action) ** 2).sum(dim=1),
        "feet_air_time": w.feet_air_time * air,
        "collision": w.collision * (task.contacts[:, CALVES] > 0).double().sum(dim=1),
        "joint_limits": w.joint_limits * ((soft_low - q).clamp(min=0) + (q - soft_high).clamp(min=0)).sum(dim=1),
    }  # fmt: skip
    terms = {k: v * dt for k, v in terms.items()}
    terms["fall"] = w.fall * task.fell.double()
    return terms
