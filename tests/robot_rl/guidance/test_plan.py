"""Plan schema, validation against the scene, oracle/wrong plans, and the LLM planner end to end
against a real OpenAI-compatible server on loopback (ReplayServer)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from robot_rl.guidance.model_client import ModelClient, ModelConfig, ModelError
from robot_rl.guidance.plan.planners import LLMPlanner, OraclePlanner, make_planner, oracle_plan
from robot_rl.guidance.plan.scene import scene_from_identity
from robot_rl.guidance.plan.schema import SKILLS, Affordance, Plan, Subgoal, point_offset
from robot_rl.guidance.plan.validation import validate_plan
from robot_rl.guidance.plan.wrong_plans import inject_wrong_option, inject_wrong_options, wrong_option_for, wrong_plan
from robot_rl.guidance.replay_server import ReplayServer
from sim.tasks.arm import BOWLS, MARKERS, OBJECTS, PADS, TEMPLATES, body_name, parse_instruction


def all_scenes(task: str):
    """Every instruction the task grammar can produce (objects x destinations x templates)."""
    if task == "arm_reach":
        combos = [("", f"{c} marker") for c in MARKERS]
    else:
        dest = PADS if task == "arm_push" else BOWLS
        combos = [(" ".join(o), " ".join(d)) for o in OBJECTS for d in dest]
    for obj, goal in combos:
        for t in TEMPLATES[task]:
            text = t.format(object=obj, goal=goal, target=goal)
            yield scene_from_identity(task, {"instruction": text, **parse_instruction(task, text)})


def pick_scene(instruction: str = "put the red cube in the blue bowl"):
    return scene_from_identity("arm_pick_place", {"instruction": instruction})


@pytest.mark.parametrize("task", ["arm_push", "arm_pick_place", "arm_reach"])
def test_oracle_plans_validate_for_every_instruction(task: str) -> None:
    scenes = list(all_scenes(task))
    assert len(scenes) == {"arm_push": 16, "arm_pick_place": 24, "arm_reach": 9}[task]
    for scene in scenes:
        plan = oracle_plan(scene)
        assert validate_plan(plan, scene) == [], scene.instruction
        names = {o.object for sg in plan.subgoals for o in sg.options}
        assert scene.target_object in names
        if task != "arm_reach":
            assert scene.destination in names
            # the other destination is in the scene too: the planner has to choose
            assert sum(a["role"] == "destination" for a in scene.objects.values()) == 2


def test_scene_objects_per_task() -> None:
    push = scene_from_identity("arm_push", {"instruction": "push the yellow cylinder onto the orange pad"})
    assert set(push.objects) == {body_name(*o) for o in OBJECTS} | {"white_pad", "orange_pad"}
    assert push.target_object == "yellow_cylinder" and push.destination == "orange_pad"
    assert push.objects["orange_pad"]["role"] == "destination" and push.objects["red_cube"]["role"] == "movable"
    pp = pick_scene()
    assert {n for n, a in pp.objects.items() if a["role"] == "destination"} == {"blue_bowl", "green_bowl"}


def test_push_convention() -> None:
    scene = scene_from_identity("arm_push", {"instruction": "push the red cube onto the white pad"})
    plan = oracle_plan(scene)
    assert [(sg.skill, sg.options[0].object, sg.options[0].point) for sg in plan.subgoals] == [
        ("reach", "red_cube", "behind"),
        ("push", "white_pad", "center"),
    ]
    # naming the pushed object in the push subgoal breaks the convention and says how to fix it
    bad = plan.model_copy(deep=True)
    bad.subgoals[1].options[0].object = "red_cube"
    reasons = validate_plan(bad, scene)
    assert any("push options name the destination" in r for r in reasons), reasons
    # pushing an object the gripper holds is rejected
    held = Plan(subgoals=[
        Subgoal(skill="reach", options=[Affordance(object="red_cube")]),
        Subgoal(skill="grasp", options=[Affordance(object="red_cube")]),
        Subgoal(skill="push", options=[Affordance(object="white_pad")]),
    ])  # fmt: skip
    assert any("cannot push 'red_cube' while holding it" in r for r in validate_plan(held, scene))
    # a push task plan with no push
    no_push = Plan(subgoals=[Subgoal(skill="reach", options=[Affordance(object="red_cube")])])
    assert any("must push" in r for r in validate_plan(no_push, scene))


def test_point_offsets_follow_the_destination_direction() -> None:
    # object at the origin, pad straight along +y: behind is -y, left (ccw from +y) is -x
    assert point_offset("behind", (0.0, 2.0), 0.03) == pytest.approx((0.0, -0.03, 0.0))
    assert point_offset("left", (0.0, 2.0), 0.03) == pytest.approx((-0.03, 0.0, 0.0))
    assert point_offset("front", None, 0.03) == pytest.approx((0.03, 0.0, 0.0))
    assert point_offset("top", None, 0.025) == pytest.approx((0.0, 0.0, 0.025))
    with pytest.raises(ValueError, match="unknown point"):
        point_offset("under", None, 0.02)


@pytest.mark.parametrize("task", ["arm_push", "arm_pick_place", "arm_reach"])
def test_wrong_plans_get_specific_reasons(task: str) -> None:
    scene = next(all_scenes(task))
    reasons = validate_plan(wrong_plan(scene, "unknown_object"), scene)
    assert reasons and all("purple_sphere" in r for r in reasons if "unknown object" in r)
    unknown = next(r for r in reasons if "unknown object" in r)
    assert all(name in unknown for name in scene.objects)  # lists what the scene does have
    assert any("order" in r for r in validate_plan(wrong_plan(scene, "wrong_order"), scene))
    assert validate_plan(wrong_plan(scene, "empty"), scene) == ["empty plan: it has no subgoals"]
    plausible = wrong_plan(scene, "wrong_object")
    assert validate_plan(plausible, scene) == []
    assert plausible != oracle_plan(scene)
    assert scene.target_object not in {o.object for sg in plausible.subgoals for o in sg.options}
    if task != "arm_reach":
        other = wrong_plan(scene, "wrong_destination")
        assert validate_plan(other, scene) == [] and other != oracle_plan(scene)
    with pytest.raises(ValueError, match="unknown wrong-plan kind"):
        wrong_plan(scene, "sideways")


def test_rejections_for_bad_options_and_order() -> None:
    scene = pick_scene()
    good = oracle_plan(scene)

    def with_option(i: int, **change) -> list[str]:
        p = good.model_copy(deep=True)
        p.subgoals[i].options[0] = p.subgoals[i].options[0].model_copy(update=change)
        return validate_plan(p, scene)

    assert any("cannot grasp 'blue_bowl'" in r for r in with_option(1, object="blue_bowl"))
    assert any("height_m 0.5 outside" in r for r in with_option(2, height_m=0.5))
    assert any("height_m -0.1 outside" in r for r in with_option(2, height_m=-0.1))
    assert any("unknown point 'bottom'" in r for r in with_option(1, point="bottom"))
    assert any("unknown approach 'below'" in r for r in with_option(1, approach="below"))
    assert any("must name a destination" in r for r in with_option(3, object="green_cube"))
    # grasping an object the gripper did not reach
    assert any("needs the gripper at 'green_cube'" in r for r in with_option(1, object="green_cube"))
    p = good.model_copy(deep=True)
    p.subgoals[0].skill = "fly"
    assert any("unknown skill 'fly'" in r for r in validate_plan(p, scene))
    p = good.model_copy(deep=True)
    p.subgoals[1].options = []
    assert any("no options" in r for r in validate_plan(p, scene))
    # release twice: the second has nothing to release
    p = good.model_copy(deep=True)
    p.subgoals.append(p.subgoals[-1])
    assert any("release needs a grasp" in r for r in validate_plan(p, scene))
    # no release at the end of a pick-and-place plan
    p = Plan(subgoals=good.subgoals[:-1])
    assert any("missing: a release" in r for r in validate_plan(p, scene))


def test_inject_wrong_option() -> None:
    scene = pick_scene()
    good = oracle_plan(scene)
    wrong = wrong_option_for(scene, good, 1)  # grasp from the side, 10 cm too high
    plan = inject_wrong_option(good, 1, wrong, position=0)
    assert plan.subgoals[1].options == [wrong, good.subgoals[1].options[0]]
    assert len(good.subgoals[1].options) == 1  # the input is not modified
    assert validate_plan(plan, scene) == []  # plausible: only experience can reject it
    carry = wrong_option_for(scene, good, 3)
    assert carry.object == "green_bowl"
    assert inject_wrong_option(good, 3, carry, position=1).subgoals[3].options[1] == carry
    with pytest.raises(ValueError, match="out of range"):
        inject_wrong_option(good, 9, wrong)
    # several injected options are distinct, all plausible, and none is the right one
    for sub in (1, 3):
        wrongs = [wrong_option_for(scene, good, sub, i) for i in range(4)]
        assert len({w.model_dump_json() for w in wrongs}) == 4
        assert good.subgoals[sub].options[0] not in wrongs
        plan = inject_wrong_options(scene, good, sub, 4)
        assert plan.subgoals[sub].options == [*wrongs, good.subgoals[sub].options[0]]  # one right option, last
        assert validate_plan(plan, scene) == []
    assert {wrong_option_for(scene, good, 3, i).object for i in range(4)} == {"green_bowl"}


# -- LLM planner against a loopback server -----------------------------------------------------------


def client_for(server: ReplayServer, tmp_path: Path, **cfg) -> ModelClient:
    base = {"base_url": server.url, "model": "replay", "mode": "live", "on_failure": "oracle", "max_retries": 2,
            "timeout_s": 5.0, "retry_backoff_s": 0.0, "cache_dir": str(tmp_path / "cache")}  # fmt: skip
    return ModelClient(ModelConfig(**{**base, **cfg}))


def fenced(plan: Plan) -> str:
    return f"Here is my plan.\n```json\n{plan.model_dump_json(indent=1)}\n```\nIt grasps first, then places."


def prompt_text(body: dict) -> str:
    return "\n".join(m["content"] for m in body["messages"] if isinstance(m["content"], str))


def test_llm_planner_parses_a_fenced_answer_and_keeps_the_goal_out_of_the_prompt(tmp_path: Path) -> None:
    scene = pick_scene("pick up the red cube and place it in the blue bowl")
    sent = oracle_plan(scene)
    sent.rationale = "grasp from above, carry to the blue bowl"
    with ReplayServer([{"match": [], "responses": [{"content": fenced(sent)}]}]) as server:
        plan, answer = LLMPlanner(client_for(server, tmp_path)).plan(scene, layout_seed=7)
        assert plan == sent and answer.source == "model" and answer.attempts == 1
        (body,) = server.requests
    text = prompt_text(body)
    assert scene.instruction in text
    assert all(name in text for name in scene.objects)
    assert all(skill in text for skill in SKILLS)
    # the structured goal is not handed over: each goal body appears once, in the object list
    assert text.count("red_cube") == 1 and text.count("blue_bowl") == 1
    assert "target_object" not in text and not re.search(r'"(target|goal|destination)"\s*:', text)


def test_llm_planner_retries_with_the_rejection_reason(tmp_path: Path) -> None:
    scene = pick_scene()
    bad, good = wrong_plan(scene, "unknown_object"), oracle_plan(scene)
    recordings = [{"match": [], "responses": [{"content": bad.model_dump_json()}, {"content": good.model_dump_json()}]}]
    with ReplayServer(recordings) as server:
        plan, answer = LLMPlanner(client_for(server, tmp_path)).plan(scene, layout_seed=1)
        assert len(server.requests) == 2
        second = prompt_text(server.requests[1])
    assert plan == good and answer.source == "model" and answer.attempts == 2
    assert "unknown object 'purple_sphere'" in second and "rejected" in second


@pytest.mark.parametrize("on_failure", ["oracle", "error"])
def test_llm_planner_all_invalid(tmp_path: Path, on_failure: str) -> None:
    scene = scene_from_identity("arm_push", {"instruction": "slide the blue cube to the white pad"})
    bad = wrong_plan(scene, "wrong_order").model_dump_json()
    with ReplayServer([{"match": [], "responses": [{"content": bad}]}]) as server:
        planner = LLMPlanner(client_for(server, tmp_path, on_failure=on_failure, max_retries=1))
        if on_failure == "error":
            with pytest.raises(ModelError, match="wrong order"):
                planner.plan(scene, layout_seed=3)
        else:
            plan, answer = planner.plan(scene, layout_seed=3)
            assert plan == oracle_plan(scene) and answer.source == "oracle" and answer.attempts == 2
        assert len(server.requests) == 2


def test_llm_planner_record_then_cache(tmp_path: Path) -> None:
    scene = pick_scene()
    sent = wrong_plan(scene, "wrong_object")  # valid, so it is recorded as is
    with ReplayServer([{"match": [], "responses": [{"content": sent.model_dump_json()}]}]) as server:
        first = ModelClient(client_for(server, tmp_path, mode="record").cfg)
        plan1, a1 = LLMPlanner(first).plan(scene, layout_seed=5)
        second = ModelClient(client_for(server, tmp_path, mode="record").cfg)
        plan2, a2 = LLMPlanner(second).plan(scene, layout_seed=5)
        assert (first.requests_made, second.requests_made) == (1, 0)
        assert plan1 == plan2 == sent and (a1.source, a2.source) == ("model", "cache")
        # feedback is part of the key: a re-plan asks again and carries the failure text
        LLMPlanner(second).plan(scene, layout_seed=5, feedback="subgoal 2 (grasp) was never achieved")
        assert second.requests_made == 1
        assert "subgoal 2 (grasp) was never achieved" in prompt_text(server.requests[-1])
    cached = list((tmp_path / "cache").glob("*.json"))
    assert len(cached) == 2 and all(json.loads(p.read_text())["key"]["request"]["kind"] == "plan" for p in cached)


def test_make_planner() -> None:
    scene = pick_scene()
    plan, answer = make_planner("oracle", None).plan(scene, layout_seed=0)
    assert plan == oracle_plan(scene) and answer.source == "oracle" and answer.attempts == 0
    assert isinstance(make_planner("oracle", None), OraclePlanner)
    with pytest.raises(ValueError, match="needs a ModelClient"):
        make_planner("llm", None)
    with pytest.raises(ValueError, match="unknown planner 'vlm'"):
        make_planner("vlm", None)
