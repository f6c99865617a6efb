"""Record mjlab's own observations of its Go1 velocity task, with the raw state behind them, for the import test.

Runs in a side venv holding mjlab (it pins mujoco 3.x, not our 4.0):
    python3 -m venv /tmp/mjlab-venv
    /tmp/mjlab-venv/bin/pip install -c requirements/constraints.txt mjlab==1.6.0
    /tmp/mjlab-venv/bin/python scripts/interop/record_mjlab_go1.py POLICY.onnx OUT.npz

The policy is mjlab's own export (see tests/data/mjlab_go1/README.md); it drives one world of the flat Go1 task in
play mode (no observation noise) for `steps` control steps on CPU. Saved per step, in mjlab's joint order: the
actor observation vector mjlab fed the network, the network's actions (onnxruntime), the joint positions and
velocities as the encoders report them (with the task's encoder bias), the IMU's body-frame linear and angular
velocity readings (taken from the observation's own base_lin_vel and base_ang_vel terms: mjlab's builtin_sensor
terms pass those sensors through unchanged; the sensor objects read outside the observation manager held a stale
value here), the trunk quaternion (w, x, y, z, as MuJoCo writes it) and the velocity command.
"""

from __future__ import annotations

import sys

import numpy as np


def main(onnx_path: str, out_path: str, steps: int = 100) -> None:
    import mjlab.tasks  # noqa: F401  (fills the task registry)
    import onnxruntime as ort
    import torch
    from mjlab.envs import ManagerBasedRlEnv
    from mjlab.tasks.registry import load_env_cfg

    cfg = load_env_cfg("Mjlab-Velocity-Flat-Unitree-Go1", play=True)
    cfg.scene.num_envs = 1
    cfg.seed = 7
    env = ManagerBasedRlEnv(cfg=cfg, device="cpu")
    obs, _ = env.reset()
    robot = env.scene["robot"]
    assert env.observation_manager.active_terms["actor"][:2] == ["base_lin_vel", "base_ang_vel"]
    session = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    keys = ("obs", "actions", "joint_pos", "joint_vel", "imu_lin_vel", "imu_ang_vel", "quat_wxyz", "command")
    rec = {k: [] for k in keys}
    for _ in range(steps):
        actor_obs = obs["actor"].cpu().numpy().astype(np.float32)
        action = session.run(None, {"obs": actor_obs})[0]
        rec["obs"].append(actor_obs[0])
        rec["actions"].append(action[0])
        rec["joint_pos"].append(robot.data.joint_pos_biased[0].cpu().numpy())
        rec["joint_vel"].append(robot.data.joint_vel[0].cpu().numpy())
        rec["imu_lin_vel"].append(actor_obs[0, 0:3])
        rec["imu_ang_vel"].append(actor_obs[0, 3:6])
        rec["quat_wxyz"].append(robot.data.root_link_quat_w[0].cpu().numpy())
        rec["command"].append(env.command_manager.get_command("twist")[0].cpu().numpy())
        obs, *_ = env.step(torch.from_numpy(action))
    np.savez_compressed(
        out_path,
        joint_names=np.array(robot.joint_names),
        **{k: np.array(v, dtype=np.float64) for k, v in rec.items()},
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
