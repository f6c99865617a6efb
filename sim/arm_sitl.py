"""One simulated arm driven by joint position targets: the plant for arm software-in-the-loop.

The same task physics as training (joint impedance servos, command latency, optional DR), stepped
one 25 Hz control period per call with the targets a ros2_control forward position controller takes
(7 joints in rad, then the two fingers in m). The scene is the reach task's (a marker to reach) or the
pick-and-place task's (one layout of its pool: the objects, the bowls, which object goes into which bowl).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from sim.env import sitl_env
from sim.robots.diff_ik import forward_kinematics
from sim.tasks.arm import ARM_DOF, FINGER_QPOS, OBJ_QPOS0, ArmPickPlace, ArmReach
from sim.tasks.arm.physical import ArmParams, write_params
from sim.tasks.arm.scene import OBJ_QVEL0

# What a Franka's ros2_control joint_state_broadcaster calls the joints, in the policy's order.
ARM_JOINT_NAMES = [f"panda_joint{i}" for i in range(1, 8)] + ["panda_finger_joint1", "panda_finger_joint2"]


SCENES = ("arm_reach", "arm_pick_place")


class ArmSitl:
    """physical: parameters that differ from the model's (sim.tasks.arm.physical), e.g. a "real" robot whose
    joint damping, armature and servo stiffness the sim-to-real tests fit. scene "arm_pick_place": layout
    `layout` of the pool that `layouts` and `layout_seed` make (the training run's task.params give the same pool,
    so a plan-guided bundle's plan `layout` is this scene's)."""

    def __init__(
        self,
        seed: int = 0,
        randomize: bool = False,
        target=(0.5, 0.0, 0.3),
        physical: Mapping[str, float] | None = None,
        scene: str = "arm_reach",
        layouts: int = 16,
        layout_seed: int = 0,
        layout: int = 0,
    ):
        if physical and randomize:
            raise ValueError("SITL takes either fixed physical parameters or randomization, not both")
        if scene not in SCENES:
            raise ValueError(f"unknown arm SITL scene '{scene}' (scenes: {', '.join(SCENES)})")
        if scene == "arm_pick_place" and not 0 <= layout < layouts:
            raise ValueError(f"layout {layout} is not one of the pool's {layouts}")
        self.scene = scene
        if scene == "arm_reach":
            task = ArmReach(action_mode="ee_position")
        else:
            task = ArmPickPlace(action_mode="ee_position", layouts=layouts, layout_seed=layout_seed)
        self.env = sitl_env(task, seed, randomize)
        self.task = self.env.task
        self.task.forced_layout = layout if scene == "arm_pick_place" else None
        if physical:
            values = {k: v for k, v in ArmParams.from_mapping(physical).as_dict().items() if k in physical}
            write_params(self.env.backend, [0], values)
        self.dt = self.task.control_dt
        self.time = 0.0
        self.set_target(target)

    def reset(self) -> None:
        """The arm at its home pose, fingers open, at rest; the servos hold that pose (pick-and-place: the
        layout's objects on the table)."""
        self.env.reset_worlds(torch.tensor([0]))
        self.set_target(self.target)
        self.time = 0.0

    def place(self, position: np.ndarray, velocity: np.ndarray, servo_targets: np.ndarray | None = None) -> None:
        """Put the arm in this joint state (the 7 joints in rad, then each finger in m; velocities alike), e.g. a
        log's, with the servos on these targets (default: the position) until the next step's arrive."""
        position, velocity = (np.asarray(x, dtype=np.float64).reshape(ARM_DOF + 2) for x in (position, velocity))
        targets = position if servo_targets is None else np.asarray(servo_targets, dtype=np.float64)
        b = self.env.backend
        for field, values in ((b.qpos, position), (b.qvel, velocity)):
            field[0, :ARM_DOF] = torch.as_tensor(values[:ARM_DOF])
            field[0, FINGER_QPOS] = torch.as_tensor(values[ARM_DOF:])
        self.task.prev_ctrl[0] = torch.as_tensor(targets.reshape(ARM_DOF + 2))
        b.forward(torch.tensor([0]))
        self.task.after_physics()  # kinematics and what the task reports, at the new state

    def place_object(self, position: np.ndarray, quaternion_xyzw: np.ndarray) -> None:
        """Pick-and-place: put the named object at this pose (m, base frame; e.g. what a log's perception
        reported), at rest."""
        if self.scene != "arm_pick_place":
            raise ValueError("place_object is for the pick-and-place scene")
        x, y, z, w = (float(v) for v in np.asarray(quaternion_xyzw, dtype=np.float64).reshape(4))
        pose = np.r_[np.asarray(position, dtype=np.float64).reshape(3), w, x, y, z]
        if not np.isfinite(pose).all() or abs(np.linalg.norm(pose[3:]) - 1.0) > 1e-3:
            raise ValueError(f"object pose {pose.tolist()} is not finite with a unit quaternion")
        j, b = int(self.task.obj_idx[0]), self.env.backend
        b.qpos[0, OBJ_QPOS0 + 7 * j : OBJ_QPOS0 + 7 * j + 7] = torch.as_tensor(pose)
        b.qvel[0, OBJ_QVEL0 + 6 * j : OBJ_QVEL0 + 6 * j + 6] = 0.0
        b.forward(torch.tensor([0]))
        self.task.after_physics()

    def set_target(self, target) -> None:
        """Where the reach marker is (m, base frame); drawn in the scene for videos. Reach only."""
        self.target = np.asarray(target, dtype=np.float64)
        if self.scene != "arm_reach":
            return
        self.task.goal_pos[0] = torch.as_tensor(self.target)
        self.task.site_pos[0, self.task.target_site] = torch.as_tensor(self.target).to(self.task.site_pos.dtype)

    def step(self, joint_targets: np.ndarray) -> None:
        q = torch.as_tensor(np.asarray(joint_targets, dtype=np.float64)).reshape(1, ARM_DOF + 2)
        if not torch.all(torch.isfinite(q)):
            raise ValueError("SITL joint targets are not finite")
        self.env.advance(self.task.joint_target_controls(q))
        self.time += self.dt

    def state(self) -> dict[str, np.ndarray]:
        b = self.env.backend
        return {
            "position": np.concatenate([b.qpos[0, :ARM_DOF].numpy(), b.qpos[0, FINGER_QPOS].numpy()]),
            "velocity": np.concatenate([b.qvel[0, :ARM_DOF].numpy(), b.qvel[0, FINGER_QPOS].numpy()]),
        }

    def tcp_position(self) -> np.ndarray:
        q = self.env.backend.qpos[:1, :ARM_DOF]
        return forward_kinematics(q).tcp[0, :3, 3].numpy().copy()

    def object_state(self) -> dict[str, np.ndarray]:
        """Pick-and-place: what perception reports (m, base frame): the named object's position and orientation
        (quaternion xyzw), the goal (the named bowl, where the object's centre rests in it), and whether the
        object is in the bowl now (the task's success check, without its hold time)."""
        if self.scene != "arm_pick_place":
            raise ValueError("object_state is for the pick-and-place scene")
        t = self.task
        q = t.obj_quat[0].numpy()
        return {
            "object_position": t.obj_pos[0].numpy().copy(),
            "object_quaternion": np.array([q[1], q[2], q[3], q[0]]),
            "goal_position": t.goal_pos[0].numpy().copy(),
            "in_goal": bool(t.in_bowl()[0]),
        }

    def instruction(self) -> str:
        return self.task.instructions[0]
