"""Frames and quaternion order.

World frame ENU (x east, y north, z up); body frame FLU (x forward, y left, z up). Rotation matrices map
body to world. Quaternions are unit, Hamilton, body to world, in one of two orders:

- QUAT_ORDER_SIM = "wxyz", scalar first: MuJoCo's qpos/xquat, sim's tasks and the firmware models;
- QUAT_ORDER_ROS = "xyzw", scalar last: ROS messages (geometry_msgs/Quaternion) and every observation
  layout input (the ops named *_quat_xyzw in robot_conventions.observation_ops).

Convert at the boundary with the functions below (numpy); the index tuples permute either way in torch:
q[..., XYZW_FROM_WXYZ] is the scalar-last form of a scalar-first q.
"""

from __future__ import annotations

import numpy as np

QUAT_ORDER_SIM = "wxyz"
QUAT_ORDER_ROS = "xyzw"
XYZW_FROM_WXYZ = (1, 2, 3, 0)
WXYZ_FROM_XYZW = (3, 0, 1, 2)


def quat_wxyz_to_xyzw(q):
    q = np.asarray(q)
    return np.concatenate([q[..., 1:4], q[..., 0:1]], axis=-1)


def quat_xyzw_to_wxyz(q):
    q = np.asarray(q)
    return np.concatenate([q[..., 3:4], q[..., 0:3]], axis=-1)


def quat_wxyz_to_rotmat(q):
    """Rotation matrix (body to world), (..., 3, 3), from unit quaternions (..., 4) scalar first."""
    q = np.asarray(q, dtype=np.float64)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    r = np.stack(
        [
            1 - 2 * (y * y + z * z),
            2 * (x * y - w * z),
            2 * (x * z + w * y),
            2 * (x * y + w * z),
            1 - 2 * (x * x + z * z),
            2 * (y * z - w * x),
            2 * (x * z - w * y),
            2 * (y * z + w * x),
            1 - 2 * (x * x + y * y),
        ],
        axis=-1,
    )
    return r.reshape(q.shape[:-1] + (3, 3))


def euler_rpy_to_quat_wxyz(roll, pitch, yaw):
    """Z-Y-X (yaw, pitch, roll) Euler angles in radians to a scalar-first quaternion."""
    cr, sr = np.cos(np.asarray(roll) / 2), np.sin(np.asarray(roll) / 2)
    cp, sp = np.cos(np.asarray(pitch) / 2), np.sin(np.asarray(pitch) / 2)
    cy, sy = np.cos(np.asarray(yaw) / 2), np.sin(np.asarray(yaw) / 2)
    return np.stack(
        [
            cr * cp * cy + sr * sp * sy,
            sr * cp * cy - cr * sp * sy,
            cr * sp * cy + sr * cp * sy,
            cr * cp * sy - sr * sp * cy,
        ],
        axis=-1,
    )


def quat_wxyz_to_euler_rpy(q):
    """Scalar-first quaternion to Z-Y-X Euler angles (roll, pitch, yaw) in radians."""
    q = np.asarray(q, dtype=np.float64)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    roll = np.arctan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
    pitch = np.arcsin(np.clip(2 * (w * y - z * x), -1.0, 1.0))
    yaw = np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    return np.stack([roll, pitch, yaw], axis=-1)
