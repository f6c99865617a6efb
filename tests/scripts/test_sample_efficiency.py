"""The sample-efficiency sweep resumes after an interruption and skips finished runs."""

from __future__ import annotations

import json
import shutil

import pytest

pytest.importorskip("pydantic")
pytestmark = pytest.mark.slow


def test_sweep_resumes_and_skips_finished_runs(tmp_path, monkeypatch, load_script):
    sweep = load_script("sample_efficiency")
    monkeypatch.chdir(tmp_path)
    argv = ["--task", "arm_push", "--variants", "dense,plan", "--seeds", "0", "--chunks", "2", "--chunk-iterations",
            "1", "--worlds", "16", "--layouts", "2", "--episodes", "8", "--out", str(tmp_path / "sweep")]  # fmt: skip
    assert sweep.main(argv) == 0
    curve = tmp_path / "sweep" / "dense_s0" / "curve.json"
    points = json.loads(curve.read_text())
    assert [p["iterations"] for p in points] == [1, 2] and points[1]["env_steps"] == 2 * points[0]["env_steps"]
    table = json.loads((tmp_path / "sweep" / "table.json").read_text())
    assert set(table) >= {"dense", "plan"} and table["dense"]["cap"] == points[1]["env_steps"]
    # plan-only success of the plan-guided run: its plan controller with a zero residual
    plan_only = sweep.commands.evaluate_run(tmp_path / "sweep" / "plan_s0", ["eval.episodes=8"], policy="zero")
    assert plan_only["policy"] == "zero" and (tmp_path / "sweep" / "plan_s0" / "eval" / "zero_train.json").exists()
    assert 0.0 <= plan_only["metrics"]["success_rate"] <= 1.0 and plan_only["reward_terms"]

    # Finished: nothing is trained again.
    stamp = curve.stat().st_mtime_ns
    calls = []
    monkeypatch.setattr(sweep.commands, "cmd_train", lambda o: calls.append(o) or [])
    assert sweep.main(argv) == 0
    assert calls == [] and curve.stat().st_mtime_ns == stamp
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)

    # Interrupted after the first chunk: resumes from the checkpoint, not from scratch.
    curve.write_text(json.dumps(points[:1]))
    assert sweep.main(argv) == 0
    again = json.loads(curve.read_text())
    assert [p["iterations"] for p in again] == [1, 2]
    meta = json.loads((tmp_path / "sweep" / "dense_s0" / "meta.json").read_text())
    assert meta["iterations"] == 2 and meta["total_steps"] == points[1]["env_steps"]

    # The corrected plan of every plan checkpoint: zero residual, the options learned by then (kept in curve.json)
    argv_corrected = [*argv, "--table-only", "--corrected-plan"]
    assert sweep.main(argv_corrected) == 0
    plan_curve = json.loads((tmp_path / "sweep" / "plan_s0" / "curve.json").read_text())
    assert all(0.0 <= p["corrected_plan"] <= 1.0 for p in plan_curve)
    assert "corrected_plan" not in json.loads(curve.read_text())[0]  # not a plan run
    evaluated = json.loads((tmp_path / "sweep" / "plan_s0" / "eval" / "corrected_plan_00002.json").read_text())
    assert evaluated["policy"] == "zero" and evaluated["name"] == "corrected_plan_00002"
    assert "plan:corrected_plan" in json.loads((tmp_path / "sweep" / "table.json").read_text())
    import robot_rl.training.ppo_trainer as trainer_module

    restored, real_restore = [], trainer_module.restore_guidance
    monkeypatch.setattr(
        trainer_module, "restore_guidance", lambda env, ck, **kw: restored.append(ck) or real_restore(env, ck, **kw)
    )
    for policy in ("corrected_plan", "zero"):  # the learned options are loaded for the corrected plan only
        sweep.commands.evaluate_run(tmp_path / "sweep" / "plan_s0", ["eval.episodes=8"], policy=policy)
    assert len(restored) == 1 and restored[0]["iteration"] == 2
    calls = []
    monkeypatch.setattr(sweep.commands, "evaluate_run", lambda *a, **k: calls.append(a))
    assert sweep.main(argv_corrected) == 0 and calls == []  # evaluated once
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)

    # Failed before its first checkpoint (config written, no model): started again, not a crash.
    shutil.rmtree(tmp_path / "sweep" / "dense_s0" / "checkpoints")
    curve.unlink()
    assert sweep.main(argv) == 0
    assert [p["iterations"] for p in json.loads(curve.read_text())] == [1, 2]


def test_table_reports_every_level_and_censors_runs_that_never_reach_it(tmp_path, load_script):
    sweep = load_script("sample_efficiency")
    curve = lambda *s: [{"env_steps": 100 * (i + 1), "success": x} for i, x in enumerate(s)]  # noqa: E731
    a = {0: curve(0.1, 0.3, 0.5), 1: curve(0.25, 0.9, 0.95), 2: curve(0.2, 0.5, 0.6)}
    curves = {"a": a, "b": {0: curve(0.0, 0.0, 0.0)}}
    md, data = sweep.table(curves, [0.8, 0.2])
    assert data["a"]["steps_to_level"] == [None, 200, None] and data["a"]["steps_to_0.2"] == [200, 100, 100]
    assert data["b"]["steps_to_level"] == [None] and data["b"]["cap"] == 300
    rows = md.splitlines()
    assert rows[0].count("steps to") == 2 and "> 300" in rows[3]
    # Two of three seeds never reach 80%: the median is censored ("> cap"); at 20% every seed got there.
    cells = [c.strip() for c in rows[2].split("|")]
    assert cells[2:6] == ["> 300", "200 - > 300", "100", "100 - 100"]
    # --table-only trains nothing and reads the curves as they are
    (tmp_path / "dense_s0").mkdir()
    (tmp_path / "dense_s0" / "curve.json").write_text(json.dumps(curve(0.3)))
    argv = ["--variants", "dense", "--seeds", "0,1", "--table-only", "--level", "0.8,0.2", "--out", str(tmp_path)]
    assert sweep.main(argv) == 0  # seed 1 never ran: left out
    saved = json.loads((tmp_path / "table.json").read_text())
    assert saved["levels"] == [0.8, 0.2] and saved["dense"]["steps_to_0.2"] == [100] and saved["dense"]["seeds"] == [0]
