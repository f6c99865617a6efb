"""The names of the observation ops a bundle's observation layout (policy.yaml) may use.

Each term of a layout names one op, its inputs (raw-state keys), dim, scale and clip. sim.observation_layout
implements the ops in torch (training), robot_rl.deploy.observation in numpy (the robot); both key their op
tables by these names, and tests/robot_conventions checks that the two agree on each op.
Vectors are world frame unless named body; quaternions are scalar last (robot_conventions.frames).
"""

from __future__ import annotations

# a -> a, the input unchanged (any units)
IDENTITY = "identity"
# (a, b) -> a - b, same units as the inputs (e.g. position - setpoint, m)
DIFFERENCE = "difference"
# q (xyzw) -> the 9 entries of its body-to-world rotation matrix, row major, unitless
ROTMAT_FROM_QUAT_XYZW = "rotmat_from_quat_xyzw"
# (v, q) -> R(q)^T v, a world vector in the body frame (FLU), units of v
BODY_FRAME = "body_frame"
# (a, b, q) -> R(q)^T (a - b), a world difference in the body frame, units of a
BODY_FRAME_DIFFERENCE = "body_frame_difference"
# (position, velocity, neighbours) -> the k nearest neighbours' [dp (m), dv (m/s)] relative to own, nearest
# first, world frame, padded FAR_NEIGHBOUR_M away and still; k = dim / 6
K_NEAREST_RELATIVE = "k_nearest_relative"

OBSERVATION_OPS = (IDENTITY, DIFFERENCE, ROTMAT_FROM_QUAT_XYZW, BODY_FRAME, BODY_FRAME_DIFFERENCE, K_NEAREST_RELATIVE)
# op name -> number of inputs
OP_ARITY = {
    IDENTITY: 1,
    DIFFERENCE: 2,
    ROTMAT_FROM_QUAT_XYZW: 1,
    BODY_FRAME: 2,
    BODY_FRAME_DIFFERENCE: 3,
    K_NEAREST_RELATIVE: 3,
}

# Padding for neighbour slots no broadcast fills (fewer drones than k + 1): far away and still, metres
FAR_NEIGHBOUR_M = 5.0
