"""KAGI end to end: marked image -> request to an OpenAI-compatible server -> validated answer -> reward.

The server is our replay server on loopback, serving answers recorded in tests/data/vlm/ (see the
file's "origin" field). Scripted state trajectories then check the reward's shape: following the
chosen path pays more than the reversed path, than moving the wrong object, and than lingering.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest
import torch

cv2 = pytest.importorskip("cv2")
pytest.importorskip("open3d")

from robot_rl.guidance.kagi import KeypointGuidanceConfig, attach_keypoint_reward, build_guides  # noqa: E402
from robot_rl.guidance.model_client import ModelConfig, ModelError  # noqa: E402
from robot_rl.guidance.replay_server import ReplayServer, request_text  # noqa: E402
from robot_rl.store import open_store  # noqa: E402
from sim.env import BatchedEnv, EnvConfig  # noqa: E402
from sim.tasks.arm import OBJ_QPOS0, ArmPickPlace  # noqa: E402

DATA = Path(__file__).parents[2] / "data" / "vlm" / "kagi_pick_place.json"
GAMMA = 0.99


def recordings() -> list[dict]:
    return json.loads(DATA.read_text())["recordings"]


def make_env(worlds: int = 2) -> BatchedEnv:
    cfg = EnvConfig(num_worlds=worlds, seed=0, randomization="none", obs_noise=False, action_latency=False,
                    pushes=False, nthread=1)  # fmt: skip
    return BatchedEnv(ArmPickPlace(layouts=2), cfg)


def vlm_config(tmp_path: Path, url: str, **model) -> KeypointGuidanceConfig:
    m = dict(base_url=url, mode="record", cache_dir=str(tmp_path / "cache"), max_retries=1, on_failure="error",
             timeout_s=5.0, retry_backoff_s=0.0)  # fmt: skip
    m.update(model)
    return KeypointGuidanceConfig(backend="vlm", model=ModelConfig(**m))


def test_vlm_keypoints_end_to_end_and_cached(tmp_path):
    env = make_env()
    with ReplayServer(recordings()) as server:
        summary = attach_keypoint_reward(env, vlm_config(tmp_path, server.url), GAMMA, tmp_path / "guidance")
        assert len(server.requests) == 2  # one per layout, not per world or step
        for req, rec in zip(server.requests, summary["records"], strict=True):
            assert rec["instruction"] in request_text(req)
            images = [p["image_url"]["url"] for m in req["messages"] if isinstance(m["content"], list)
                      for p in m["content"] if p.get("type") == "image_url"]  # fmt: skip
            assert len(images) == 1 and images[0].startswith("data:image/png;base64,")
            sent = cv2.imdecode(np.frombuffer(base64.b64decode(images[0].split(",", 1)[1]), np.uint8), cv2.IMREAD_COLOR)
            saved = cv2.imread(str(tmp_path / "guidance" / f"layout_{rec['layout']:03d}.png"))
            assert np.array_equal(sent, saved)  # the request carried the marked image we saved
            assert rec["source"] == "model" and rec["matches_oracle"]
        assert (tmp_path / "guidance" / "keypoints_prompt.png").stat().st_size > 10_000

        logs = {}
        for _ in range(env.max_episode_length + 1):  # past one episode: every term is logged by name
            _, rew, _, extras = env.step(torch.zeros(env.num_envs, env.num_actions))
            assert torch.isfinite(rew).all()
            logs.update(extras["episode"])
        assert "rew_keypoint_progress" in logs and "rew_success" in logs

        # A second run (fresh client, same cache) asks nothing.
        again, summary2 = build_guides(ArmPickPlace(layouts=2), vlm_config(tmp_path, server.url))
        assert summary2["requests"] == 0 and len(server.requests) == 2
        assert summary2["sources"] == {"cache": 2}
        assert [g.to_json()["answer"] for g in again] == [r["answer"] for r in summary["records"]]


def test_bad_answers_are_retried_with_the_error_then_accepted(tmp_path):
    good = recordings()[0]
    bad = [
        {"content": "I think the red cube should go in the bowl."},  # no JSON at all
        {"content": '{"grasp": 99, "target": 1, "waypoints": []}'},  # unknown mark
        {"content": '{"grasp": 1, "target": 16, "waypoints": [{"cell": "Z9", "height_cm": 5}]}'},
        {"content": '{"grasp": 1, "target": 16, "waypoints": [{"cell": "A1", "height_cm": 80}]}'},
        {"status": 500, "body": "upstream error"},
        {"delay_s": 1.0, "content": "too late"},
    ]
    recs = [{"match": good["match"], "responses": bad + good["responses"]}, *recordings()[1:]]
    with ReplayServer(recs) as server:
        cfg = vlm_config(tmp_path, server.url, max_retries=len(bad), timeout_s=0.4)
        guides, summary = build_guides(ArmPickPlace(layouts=2), cfg)
    first = summary["records"][0]
    assert first["source"] == "model" and first["matches_oracle"]
    errors = "\n".join(first["errors"])
    assert len(first["errors"]) == len(bad)
    for expected in ("JSON", "99", "Z9", "80", "500", "timed out"):
        assert expected in errors, (expected, errors)
    # Each rejected answer went back to the model with its reason.
    feedback = request_text(server.requests[2])
    assert "rejected" in feedback and "99" in feedback


def test_failed_model_falls_back_to_oracle_or_fails_clearly(tmp_path):
    always_bad = [{"match": [], "responses": [{"status": 500, "body": "down"}]}]
    with ReplayServer(always_bad) as server:
        guides, summary = build_guides(ArmPickPlace(layouts=2), vlm_config(tmp_path, server.url, on_failure="oracle"))
        assert summary["sources"] == {"oracle": 2} and all(r["matches_oracle"] for r in summary["records"])
        assert len(server.requests) == 2 * 2  # max_retries=1: two attempts per layout, no hidden retries
        with pytest.raises(ModelError, match="500"):
            build_guides(ArmPickPlace(layouts=2), vlm_config(tmp_path, server.url, on_failure="error"))


# -- reward shape on scripted trajectories ----------------------------------------------------------
def _script(env, grasp_point, obj_index: int, obj_path: list[np.ndarray], steps: int = 150) -> float:
    """Discounted return of world 0 when the TCP goes to grasp_point, then carries object obj_index along
    obj_path (positions of its centre), then stays. State is written kinematically: no physics step."""
    t, b = env.task, env.backend
    env.reset()
    tcp0 = t.tcp_pos[0].clone()
    obj0 = b.qpos[0, OBJ_QPOS0 + 7 * obj_index : OBJ_QPOS0 + 7 * obj_index + 3].clone()
    reach = [tcp0 + (torch.as_tensor(grasp_point) - tcp0) * (i + 1) / 15 for i in range(15)]
    pts = [obj0.numpy(), *obj_path]
    carry = []
    for a, c in zip(pts[:-1], pts[1:], strict=True):
        carry += [torch.as_tensor(a + (c - a) * (i + 1) / 15) for i in range(15)]
    ret, disc = 0.0, 1.0
    for k in range(steps):
        if k < len(reach):
            obj, tcp = obj0, reach[k]
        else:
            obj = carry[min(k - len(reach), len(carry) - 1)]
            tcp = obj
        b.qpos[0, OBJ_QPOS0 + 7 * obj_index : OBJ_QPOS0 + 7 * obj_index + 3] = obj
        t._update_kinematics()
        t.tcp_pos = t.tcp_pos.clone()
        t.tcp_pos[0] = tcp
        terms = env.reward.terms()
        ret += disc * float(sum(v[0] for v in terms.values()))
        disc *= GAMMA
    return ret


def test_noisy_oracle_draws_its_wrong_marks_from_the_run_seed():
    """The ablation's noise: p = 1 replaces a mark in every layout, p = 0 in none, the realized count is saved,
    and the draws follow the run's seed (a fixed draw once gave every seed of a sweep zero wrong layouts)."""
    import random

    from robot_rl.config import load_config
    from robot_rl.guidance.keypoint_selection import wrong_layouts

    task = ArmPickPlace(layouts=2)
    _, every = build_guides(task, KeypointGuidanceConfig(backend="noisy_oracle", noise_p=1.0))
    assert every["wrong_layouts"] == 2 and every["sources"] == {"noisy_oracle": 2}
    assert all("noisy oracle: wrong" in r["answer"]["rationale"] for r in every["records"])
    _, none = build_guides(task, KeypointGuidanceConfig(backend="noisy_oracle", noise_p=0.0))
    assert none["wrong_layouts"] == 0
    drawn = [wrong_layouts(16, 0.2, random.Random(seed)) for seed in range(3)]
    assert all(len(w) == 3 for w in drawn) and len({frozenset(w) for w in drawn}) == 3  # 3 of 16, per seed
    cfg = load_config(["task=arm_push", "guidance=keypoint", "guidance.backend=noisy_oracle", "seed=3"])
    assert cfg.guidance.noise_seed == 3 and cfg.guidance.seed == 0  # noise per run, the same marks for all


def test_following_the_chosen_path_pays_most():
    env = make_env(worlds=1)
    cfg = KeypointGuidanceConfig(backend="oracle")
    attach_keypoint_reward(env, cfg, GAMMA)
    t, r = env.task, env.reward
    t.forced_layout = lay = 1  # every scripted episode in the same layout
    env.reset()
    names = t.object_body.tolist()
    obj = names.index(int(r.grasp_body[lay]))
    grasp = r.path_point(torch.zeros(1, dtype=torch.long))[0].numpy()
    wps = [w.numpy() for w in r.wp[lay, : int(r.n_wp[lay])]]
    goal = r.path_point(torch.full((1,), int(r.n_wp[lay]) + 1))[0].numpy()
    assert len(wps) == 2  # pick-and-place oracle: lift, carry

    success = _script(env, grasp, obj, [*wps, goal])
    linger = _script(env, grasp, obj, wps)  # carried to the last waypoint above the bowl, never placed
    reverse = _script(env, grasp, obj, wps[::-1])  # the path walked backwards
    other = (obj + 1) % len(names)
    other_start = env.backend.qpos[0, OBJ_QPOS0 + 7 * other : OBJ_QPOS0 + 7 * other + 3].numpy().copy()
    wrong = _script(env, other_start + np.array([0, 0, 0.02]), other, [*wps, goal])  # the wrong object
    print(f"\nreturns: success {success:.2f} linger {linger:.2f} reversed {reverse:.2f} wrong object {wrong:.2f}")
    assert success > linger > reverse
    assert success > wrong
    # Potential-based: all the progress shaping of an episode is worth at most the progress weight.
    assert linger <= cfg.weights.progress + 1e-6


def test_a_training_run_survives_a_failing_model_server(tmp_path, capsys):
    from robot_rl.cli import main

    down = [{"match": [], "responses": [{"status": 503, "body": "overloaded"}]}]
    common = ["task=arm_pick_place", "guidance=keypoint", "guidance.backend=vlm", "task.params.layouts=2",
              "task.num_worlds=16", "train.iterations=1", "train.progress=false", f"runs_root={tmp_path}",
              "guidance.model.max_retries=1", f"guidance.model.cache_dir={tmp_path / 'cache'}",
              "guidance.model.mode=record"]  # fmt: skip
    with ReplayServer(down) as server:
        url = f"guidance.model.base_url={server.url}"
        assert main(["train", *common, url, "run_name=fallback"]) == 0  # oracle fallback, run finishes
        keypoints = json.loads((tmp_path / "fallback" / "guidance" / "keypoints.json").read_text())
        assert keypoints["sources"] == {"oracle": 2} and "503" in keypoints["records"][0]["errors"][0]
        out, err = capsys.readouterr()
        # labelled as what it was, in the run and on the dashboard's leaderboard; one warning line, no retries
        label = "keypoint:vlm->oracle (2/2 layouts)"
        assert json.loads((tmp_path / "fallback" / "meta.json").read_text())["guidance"] == label
        assert [line for line in (out + err).splitlines() if "warning" in line.lower()] == [
            f"robot-rl: warning: guidance {label}: the model gave no valid answer for those (run's guidance/)"
        ]
        assert "attempt" not in out + err
        store = open_store(runs_root=str(tmp_path))
        assert [r["guidance"] for r in store.leaderboard()["runs"]] == [label]
        store.close()
        assert main(["train", *common, url, "run_name=strict", "guidance.model.on_failure=error"]) == 2
        err = capsys.readouterr().err
        assert "503" in err and "Traceback" not in err


def test_attaching_the_keypoint_reward_keeps_the_episodes():
    """Runs that differ only in their reward see the same episodes: attaching draws nothing from the env's
    generator and resets no world (it once did, so KAGI's demonstrations differed between reward variants)."""
    env = make_env(worlds=2)
    state, obs = env.rng.get_state().clone(), env.get_observations()["policy"].clone()
    attach_keypoint_reward(env, KeypointGuidanceConfig(backend="oracle"), GAMMA)
    assert torch.equal(env.rng.get_state(), state)
    assert torch.equal(env.get_observations()["policy"], obs)
    r = env.reward
    assert torch.equal(r.k, torch.zeros_like(r.k))
    assert torch.allclose(r.phi, r._potential())  # the shaping starts from the current state
