"""robot-rl train algo=td3, then eval, export and the bundle's eval, through the CLI's own functions."""

import json

import pytest

from robot_rl import commands
from robot_rl.training.checkpoint import load_checkpoint


@pytest.mark.parametrize("algo", ["td3", "sac"])
def test_train_eval_export_end_to_end(tmp_path, capsys, algo, fast_overrides):
    (run,) = commands.cmd_train(
        [f"runs_root={tmp_path}", f"algo={algo}", "run_name=r", "seed=2", *fast_overrides, "eval.episodes=16"]
    )
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "finished" and meta["algo"] == algo
    assert meta["total_steps"] == 2 * 8 * 16
    ckpt = load_checkpoint(run / "checkpoints" / "model_2.pt")
    assert ckpt["algo"]["name"] == algo and ckpt["updates"] > 0
    assert (run / "checkpoints" / "replay.pt").is_file()
    assert any((run / "tb").iterdir())

    torch_eval = commands.evaluate_run(run)
    assert torch_eval["episodes"] == 16 and "success_ci95" in torch_eval["metrics"]
    assert "Wilson 95%" in capsys.readouterr().out
    bundle = commands.export_run(run)
    assert (bundle / "policy.onnx").is_file() and (bundle / "policy.yaml").is_file()
    onnx_eval = commands.evaluate_run(run, use_bundle=True)
    # the same deterministic actor through ONNX and the deploy runtime: the same outcome on the same seeds
    for k in ("success_rate", "crash_rate"):
        assert onnx_eval["metrics"][k] == pytest.approx(torch_eval["metrics"][k], abs=1 / 16), k


def test_resume_continues_the_off_policy_run(tmp_path, capsys, fast_overrides):
    (run,) = commands.cmd_train(
        [f"runs_root={tmp_path}", "algo=td3", "run_name=r", *fast_overrides, "eval.episodes=16"]
    )
    capsys.readouterr()
    commands.cmd_train([f"runs_root={tmp_path}", f"resume={run}", "train.iterations=3", "resume_finished=true"])
    out = capsys.readouterr().out
    assert "transitions restored" in out
    assert load_checkpoint(run / "checkpoints" / "model_3.pt")["total_steps"] == 3 * 8 * 16
