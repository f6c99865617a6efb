"""The swarm comparison (issue 8) resumes after an interruption and skips finished work."""

from __future__ import annotations

import json
import statistics

import pytest


def test_comparison_resumes_and_skips_finished_work(tmp_path, monkeypatch, load_script):
    cmp = load_script("swarm_comparison")
    out = tmp_path / "cmp"
    argv = ["--seeds", "0", "--iterations", "2", "--save-every", "1", "--worlds", "2", "--drones", "3", "--scenes",
            "2", "--gap-episodes", "2", "--episode-s", "0.5", "--eval-threads", "1", "--out", str(out),
            "--stage2", "+task.params.rewards.obstacle_collision=-7.5"]  # fmt: skip
    assert cmp.main(argv) == 0
    table = json.loads((out / "table.json").read_text())
    assert set(table["baselines"]) == {"goto", "apf", "cbf", "cbf_sensed"}
    assert set(table["policies"]) == {"stage1", "stage2"}
    # --stage2 overrides reach stage 2 only
    assert "obstacle_collision: -7.5" in (out / "stage2_s0" / "config.yaml").read_text()
    assert "obstacle_collision: -7.5" not in (out / "stage1_s0" / "config.yaml").read_text()
    assert table["command"].startswith("python scripts/swarm_comparison.py --seeds 0")
    assert set(table["policies"]["stage2"]["per_seed"]["0"]) == {*cmp.COLUMNS, "per_scene"}
    assert table["stage2_minus_stage1_collision"]["scene_pairs"] == 2
    assert "paired over 2 scenes" in (out / "table.md").read_text()
    # stage 2 is a run of its own: init_from trains --iterations more, counted from 0
    assert (out / "stage2_s0" / "checkpoints" / "model_2.pt").exists()
    assert not (out / "stage2_s0" / "checkpoints" / "model_4.pt").exists()
    assert json.loads((out / "stage2_s0" / "meta.json").read_text())["init_from"].endswith("model_2.pt")

    # Interrupted in stage 2 (its final checkpoint and its evaluation missing): only that is redone.
    (out / "stage2_s0" / "checkpoints" / "model_2.pt").unlink()
    (out / "eval" / "stage2_s0.json").unlink()
    trained, evaluated = [], []
    real_train, real_eval = cmp.commands.cmd_train, cmp.evaluate
    monkeypatch.setattr(cmp.commands, "cmd_train", lambda o: trained.append(o) or real_train(o))
    monkeypatch.setattr(cmp, "evaluate", lambda *a, **k: evaluated.append(k) or real_eval(*a, **k))
    assert cmp.main(argv) == 0
    assert trained == [[f"resume={out / 'stage2_s0'}", "train.iterations=2", "resume_finished=true"]]
    assert len(evaluated) == 1 and evaluated[0].get("scenario", "clutter") == "clutter"
    assert (out / "stage2_s0" / "checkpoints" / "model_2.pt").exists()

    # Finished: nothing is trained or evaluated again.
    trained.clear(), evaluated.clear()
    assert cmp.main(argv) == 0
    assert trained == [] and evaluated == []


def test_imitation_warm_start_runs_before_stage_1_and_is_skipped_once_done(tmp_path, monkeypatch, load_script):
    cmp = load_script("swarm_comparison")
    out = tmp_path / "cmp"
    argv = ["--seeds", "0", "--iterations", "1", "--save-every", "1", "--worlds", "2", "--drones", "3", "--scenes",
            "2", "--gap-episodes", "2", "--episode-s", "0.2", "--eval-threads", "1", "--imitation-rounds", "2",
            "--imitation-steps", "10", "--out", str(out)]  # fmt: skip
    assert cmp.main(argv) == 0
    table = json.loads((out / "table.json").read_text())
    assert list(table["policies"]) == ["imitation", "stage1", "stage2"]
    warm = out / "imitation_s0" / "checkpoints" / "model_0.pt"
    assert json.loads((out / "stage1_s0" / "meta.json").read_text())["init_from"] == str(warm)
    assert json.loads((out / "imitation_s0" / "imitation.json").read_text())["config"]["rounds"] == 2
    assert "imitation warm start" in (out / "table.md").read_text()

    # Finished: the warm start is neither redone nor re-evaluated.
    imitated, evaluated = [], []
    monkeypatch.setattr(cmp.commands, "cmd_imitate", lambda o: imitated.append(o))
    monkeypatch.setattr(cmp, "evaluate", lambda *a, **k: evaluated.append(k))
    assert cmp.main(argv) == 0
    assert imitated == [] and evaluated == []


def test_paired_collision_change_compares_the_same_scenes(load_script):
    cmp = load_script("swarm_comparison")
    s1 = {0: {"per_scene": {"collision": [2, 0, 3]}}, 1: {"per_scene": {"collision": [1, 1, 1]}}}
    s2 = {0: {"per_scene": {"collision": [1, 0, 3]}}, 1: {"per_scene": {"collision": [1, 0, 1]}}, 2: {}}
    change = cmp.paired_collision_change(s1, s2, drones=6)
    # differences in drones: -1, 0, 0 and 0, -1, 0 -> mean -1/3 drone per scene = -1/18 of the drones
    assert change["scene_pairs"] == 6 and change["mean"] == -1 / 18
    half = 1.96 * statistics.stdev([-1 / 6, 0, 0, 0, -1 / 6, 0]) / 6**0.5
    assert change["ci95"] == pytest.approx([-1 / 18 - half, -1 / 18 + half])
    assert cmp.paired_collision_change(s1, {0: {}}, drones=6) is None  # nothing to pair
