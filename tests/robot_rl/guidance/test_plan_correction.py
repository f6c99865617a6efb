"""Online option choice (bandit and LLM-TALE's value + bonus), the worlds' choice through it, re-plan trigger
and re-planning, resumable state, and DECKARD-style verification of the subgoal graph."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from robot_rl.guidance.plan.option_choice import choose_options, option_values
from robot_rl.guidance.plan.option_selector import OptionSelector
from robot_rl.guidance.plan.planners import OraclePlanner, oracle_plan
from robot_rl.guidance.plan.replanning import replan
from robot_rl.guidance.plan.scene import scene_from_identity
from robot_rl.guidance.plan.subgoals import PlanTables
from robot_rl.guidance.plan.verification import PlanVerifier
from robot_rl.guidance.plan.wrong_plans import inject_wrong_option, wrong_option_for


def simulate(sel: OptionSelector, p_success: list[float], episodes: int, seed: int = 0, values=None) -> list[int]:
    """One subgoal attempt per episode at layout 0, subgoal 2; returns the option chosen each time."""
    rng = random.Random(seed)
    chosen = []
    for _ in range(episodes):
        v = values(sel) if values is not None else None
        i = sel.choose(0, 2, len(p_success), v)
        sel.report(0, 2, i, rng.random() < p_success[i])
        chosen.append(i)
    return chosen


def test_bandit_drops_a_wrong_option_and_prefers_the_best() -> None:
    sel = OptionSelector(rule="bandit", seed=1)
    start = sel.probabilities(0, 2, 3)
    chosen = simulate(sel, [0.0, 0.9, 0.5], 200)
    assert chosen[:3] == [0, 1, 2]  # untried options first
    assert chosen[100:].count(1) / 100 > 0.7
    wrong = [t for t, i in enumerate(chosen) if i == 0]
    assert len(wrong) <= 5, wrong  # a dead option costs a handful of attempts, not a log-rate stream
    # episodes until the wrong option is (practically) no longer chosen: its preference < 5 % for good
    replay = OptionSelector(rule="bandit", seed=1)
    rng, settled = random.Random(0), None
    for t in range(200):
        i = replay.choose(0, 2, 3)
        replay.report(0, 2, i, rng.random() < [0.0, 0.9, 0.5][i])
        if replay.probabilities(0, 2, 3)[0] >= 0.05:
            settled = None
        elif settled is None:
            settled = t
    assert settled is not None and settled < 50, settled
    end = sel.probabilities(0, 2, 3)
    assert start == pytest.approx([1 / 3] * 3)
    assert end[0] < 0.01 < start[0] and end[1] == max(end)


def test_value_bonus_follows_the_critic() -> None:
    p = [0.0, 0.8]  # option 0 is wrong (always fails), option 1 mostly works

    def learned(sel: OptionSelector) -> list[float]:
        # a critic that starts out favouring option 0 and learns from its failures
        s = sel.stats.get((0, 2))
        fails = [st.tries - st.successes for st in s] if s else [0, 0]
        return [1.0 * 0.7 ** fails[0], 0.6]

    chosen = simulate(OptionSelector(rule="value_bonus", seed=0), p, 150, values=learned)
    wrong = [t for t, i in enumerate(chosen) if i == 0]
    assert len(wrong) < 10 and max(wrong) < 30, wrong
    assert chosen[-50:].count(1) == 50

    # LLM-TALE trusts the critic: with values that never learn, the wrong option keeps being chosen
    stuck = simulate(OptionSelector(rule="value_bonus", seed=0), p, 150, values=lambda s: [1.0, 0.6])
    assert stuck[-50:].count(0) == 50
    # values=None: the count bonus alone tries the options in turn (warm-up)
    # (chosen counts grow at choose(): a batch of worlds choosing before any report is spread too)
    warm = OptionSelector(rule="value_bonus")
    assert [warm.choose(1, 0, 3) for _ in range(6)] == [0, 1, 2, 0, 1, 2]
    batch = OptionSelector(rule="bandit")
    assert [batch.choose(1, 0, 3) for _ in range(4)] == [0, 1, 2, 0]


def test_epsilon_and_argument_checks() -> None:
    sel = OptionSelector(rule="bandit", epsilon=1.0, seed=3)
    chosen = simulate(sel, [1.0, 0.0, 0.0], 300)
    assert all(chosen.count(i) > 60 for i in range(3))  # uniformly random, whatever succeeds
    with pytest.raises(ValueError, match="unknown option rule"):
        OptionSelector(rule="greedy")
    with pytest.raises(ValueError, match="2 values for 3 options"):
        OptionSelector().choose(0, 0, 3, [0.1, 0.2])
    with pytest.raises(ValueError, match="never chosen"):
        OptionSelector().report(0, 0, 0, True)


def test_needs_replan_fires_after_all_options_fail_and_at_most_max_replans() -> None:
    sel = OptionSelector(rule="bandit", replan_after=5, max_replans=2)
    sel.set_plan(4, ["reach red_cube", "grasp red_cube", "lift red_cube"])
    fired = []
    for _ in range(6):
        for _ in range(30):  # subgoal 0 always works, subgoal 1 never does
            sel.report(4, 0, sel.choose(4, 0, 1), True)
            i = sel.choose(4, 1, 2)
            sel.report(4, 1, i, False)
            if sel.stats[(4, 1)][0].streak == 4 and sel.stats[(4, 1)][1].streak == 4:
                assert sel.needs_replan(4) is None  # one failure short on every option
            text = sel.needs_replan(4)
            if text:
                fired.append(text)
                sel.replanned(4)
                sel.set_plan(4, ["reach red_cube", "grasp red_cube", "lift red_cube"])
                break
    assert len(fired) == 2 and sel.replans[4] == 2
    assert "subgoal 2 (grasp red_cube)" in fired[0] and "0/5 achieved" in fired[0]
    assert "subgoal 1" not in fired[0]
    assert sel.needs_replan(7) is None  # other layouts are unaffected

    # a working but imperfect option never triggers a re-plan: its failure streaks stay short
    ok = OptionSelector(rule="bandit", epsilon=0.5, replan_after=20)
    simulate(ok, [0.0, 0.7], 400, seed=2)
    assert ok.stats[(0, 2)][0].streak >= 20 and ok.stats[(0, 2)][1].successes > 100 and ok.needs_replan(0) is None


def test_state_dict_round_trip_continues_identically() -> None:
    a = OptionSelector(rule="bandit", epsilon=0.2, seed=5, history_window=50, history_max=3)
    simulate(a, [0.2, 0.6, 0.4], 120, seed=1)
    a.set_plan(0, ["x", "y", "z"])
    state = json.loads(json.dumps(a.state_dict()))  # JSON-able
    b = OptionSelector()
    b.load_state_dict(state)
    assert b.state_dict() == a.state_dict()
    assert simulate(a, [0.2, 0.6, 0.4], 80, seed=9) == simulate(b, [0.2, 0.6, 0.4], 80, seed=9)
    # history stays bounded: 200 choices in windows of 50, at most 3 closed windows kept
    assert len(a.history) <= 4 and a.history[-1]["first"] >= 150
    assert sum(sum(c) for h in a.history for c in h["counts"].values()) == sum(h["choices"] for h in a.history)


def test_verifier_statuses_edges_and_save(tmp_path: Path) -> None:
    scene = scene_from_identity("arm_pick_place", {"instruction": "put the red cube in the blue bowl"})
    good = oracle_plan(scene)
    plan = inject_wrong_option(good, 1, wrong_option_for(scene, good, 1))
    v = PlanVerifier(plan, threshold=5)
    for _ in range(30):
        v.record(0, True)  # reach: always
    for k in range(30):
        v.record(1, k % 3 == 0, option=k % 2)  # grasp: 10 of 30
    for _ in range(10):
        v.record(2, False)  # lift: 10 attempts, nothing -- not yet refuted
    for _ in range(20):
        v.record(3, False)  # transport: 20 attempts (4 x threshold), nothing -- refuted
    s = v.summary()
    assert [x["status"] for x in s["subgoals"]] == ["verified", "verified", "unverified", "refuted",
                                                    "unverified", "unverified"]  # fmt: skip
    assert s["first_refuted"] == 3 and s["plan_verified"] is False
    assert s["subgoals"][1]["rate"] == pytest.approx(1 / 3)
    assert [o["attempts"] for o in s["subgoals"][1]["options"]] == [15, 15]
    assert s["subgoals"][1]["objects"] == ["red_cube", "red_cube"]
    assert s["edges"][0] == {"from": 0, "to": 1, "given": 30, "achieved": 10, "rate": pytest.approx(1 / 3)}
    assert s["edges"][2]["rate"] is None  # nothing achieved at lift: no conditional rate
    assert 0 < s["subgoals"][1]["ema"] < 1 and s["subgoals"][0]["ema"] > 0.9

    path = v.save(tmp_path / "verify" / "layout_3.json")
    data = json.loads(path.read_text())
    assert data["subgoals"][3]["status"] == "refuted"
    assert data["plan"]["subgoals"][1]["options"][0]["approach"] == "side"  # the injected option is kept
    assert PlanVerifier.load(path).summary() == s


def test_verifier_counts_round_trip() -> None:
    scene = scene_from_identity("arm_push", {"instruction": "push the red cube onto the white pad"})
    v = PlanVerifier(oracle_plan(scene))
    v.record(0, True, option=0)
    v.record(1, False, option=0)
    fresh = PlanVerifier(oracle_plan(scene))
    fresh.load_counts(json.loads(json.dumps(v.counts())))
    assert fresh.summary() == v.summary()


def test_option_values_try_each_option_in_turn_and_restore_the_choice() -> None:
    opt, ids, n_opt = torch.tensor([0, 1, 0]), torch.tensor([0, 2]), torch.tensor([2, 3])
    seen = []

    def value() -> torch.Tensor:  # every world's value, from the options set now
        seen.append(opt.tolist())
        return (10 * opt + torch.arange(3)).double().unsqueeze(1)

    out = option_values(ids, n_opt, opt, value)
    assert opt.tolist() == [0, 1, 0]
    assert seen == [[0, 1, 0], [1, 1, 1], [1, 1, 2]]  # world 0 has two options: its last one repeats
    assert out[:, :3].tolist() == [[0, 10, 10], [2, 12, 22]] and bool(out[:, 3:].isneginf().all())


def test_choose_options_skips_worlds_whose_plan_is_done() -> None:
    tables = PlanTables(layouts=1)
    tables.n_sub[0] = 2
    tables.n_opt[0, :2] = torch.tensor([1, 3])
    sel = OptionSelector(rule="value_bonus", seed=0)
    sub, opt = torch.tensor([1, 2, 1]), torch.tensor([0, 4, 0])
    values = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]])  # world 0, world 1 (done)
    choose_options(sel, tables, torch.zeros(3, dtype=torch.long), sub, opt, torch.tensor([0, 1]), values)
    assert opt.tolist() == [2, 4, 0]  # the highest value; the finished world and the one not asked keep theirs


def test_replan_asks_the_planner_only_when_the_selector_wants_it() -> None:
    scene = scene_from_identity("arm_push", {"instruction": "push the red cube onto the white pad"})
    sel = OptionSelector(rule="bandit", replan_after=2, max_replans=1)
    sel.set_plan(3, ["reach red_cube", "push white_pad"])
    assert replan(sel, OraclePlanner(), scene, 3, layout_seed=0) is None
    for _ in range(2):
        sel.report(3, 1, sel.choose(3, 1, 1), False)
    plan, source = replan(sel, OraclePlanner(), scene, 3, layout_seed=0)
    assert plan == oracle_plan(scene) and source == "oracle" and sel.replans[3] == 1
    for _ in range(2):
        sel.report(3, 1, sel.choose(3, 1, 1), False)
    assert replan(sel, OraclePlanner(), scene, 3, layout_seed=0) is None  # max_replans reached
