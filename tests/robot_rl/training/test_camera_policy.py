"""A policy with camera observations trains through the same PPO (a CNN encodes the image group),
resumes and evaluates; export refuses it with a clear message, since bundles carry state layouts."""

from __future__ import annotations

import pytest


def test_camera_policy_trains_resumes_and_is_not_exported(tmp_path):
    from robot_rl import commands
    from robot_rl.training.checkpoint import latest_checkpoint, load_checkpoint

    common = [f"runs_root={tmp_path}", "task=arm_reach", "task.num_worlds=4", "train.progress=false",
              "task.params.camera_obs=front", "task.params.camera_kind=depth", "task.params.camera_size=32",
              "algo.num_steps_per_env=8", "train.save_every=1"]  # fmt: skip
    (run,) = commands.cmd_train([*common, "train.iterations=2", "run_name=cam"])
    ckpt = load_checkpoint(latest_checkpoint(run))  # data only, like every checkpoint load
    assert any(k.startswith("cnns.") for k in ckpt["actor_state_dict"]), list(ckpt["actor_state_dict"])[:5]
    commands.cmd_train([f"resume={run}", "train.iterations=3", "resume_finished=true"])
    assert latest_checkpoint(run).name == "model_3.pt"
    result = commands.evaluate_run(run, ["eval.episodes=2"])  # the actor reads the image group in evaluation too
    assert result["episodes"] == 2 and 0.0 <= result["metrics"]["success_rate"] <= 1.0
    with pytest.raises(ValueError, match="camera images"):
        commands.export_run(run)
