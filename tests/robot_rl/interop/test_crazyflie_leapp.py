"""The Crazyflie across the LEAPP boundary: the committed hover policy exported by `robot-rl export format=leapp`
runs in leapp's own loader as our bundle does, imports back onto crazyflie_2_1 with the same commands, and flies;
foreign pipelines map onto it by kinds, names and frames, or are refused naming what cannot be mapped.

Commands are compared in policy-action units, (command difference) / (the original bundle's action scale): the
thrust is a PWM value near 39,000 carried in float32 (one ulp there is 0.004), so an absolute 1e-5 in PWM is below
what either side can represent; 1e-5 of the action scale is 0.21 PWM, 3e-4 degrees.
"""

from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("leapp")

from robot_rl.cli import main  # noqa: E402

RPYT = ["roll_deg", "pitch_deg", "yaw_rate_deg_s", "thrust_pwm"]
INPUTS = ["goal", "position", "quaternion", "velocity", "angular_velocity"]


def _import(pipeline: Path, out: Path, capsys, *opts: str) -> tuple[int, str]:
    capsys.readouterr()  # drop what tracing printed: what follows is the command's own output
    code = main(["import", str(pipeline), f"out={out}", *opts])
    captured = capsys.readouterr()
    return code, captured.err.strip() or captured.out.strip()


def _pipeline(run: Path) -> Path:
    return run / "leapp" / "crazyflie_hover" / "crazyflie_hover.yaml"


def test_exported_pipeline_runs_in_leapp_like_our_bundle(crazyflie_leapp_run, crazyflie_raw_states):
    from leapp import InferenceManager

    from robot_rl.deploy import PolicyRuntime
    from robot_rl.interop.leapp_pipeline import read_pipeline

    pl = read_pipeline(_pipeline(crazyflie_leapp_run))
    ports = {p.name: p for p in pl.inputs + pl.outputs}
    assert ports["position"].kind == "state/body/position" and ports["position"].extra["frame"] == "world"
    assert ports["velocity"].kind == "state/body/linear_velocity" and ports["velocity"].extra["frame"] == "world"
    assert ports["angular_velocity"].extra["frame"] == "body"
    assert ports["quaternion"].element_names == ("x", "y", "z", "w")
    assert ports["robot_command"].element_names == tuple(RPYT)
    assert ports["robot_command"].extra["action_mode"] == "rpyt"
    assert pl.configs["frequency"] == 100.0 and pl.configs["robot"] == "crazyflie_2_1"
    assert pl.feedback == {"last_action_out": "last_action_in", "goal_error_integral_out": "goal_error_integral_in"}

    manager = InferenceManager(str(_pipeline(crazyflie_leapp_run)))  # leapp's loader: sha256, shapes, feedback
    assert manager.inputs == [f"policy/{k}" for k in INPUTS]
    runtime = PolicyRuntime(crazyflie_leapp_run / "bundle")
    scale = runtime.bundle.action.scale
    errors, commands = [], []
    for raw in crazyflie_raw_states:
        out = manager({f"policy/{k}": torch.tensor(raw[k], dtype=torch.float32)[None] for k in INPUTS})
        ours = runtime.act(raw)
        errors.append(np.max(np.abs(out["policy/robot_command"].numpy()[0] - ours) / scale))
        commands.append(ours)
    # last action and the goal-error integrator evolve in leapp's feedback as in our runtime: 300 steps agree
    print(f"leapp vs bundle: max |d command| / scale {max(errors):.2e} over {len(errors)} steps")
    assert max(errors) < 1e-5
    assert np.std(np.array(commands), axis=0).min() > 1.0  # it flew: roll, pitch, yaw rate and thrust all moved


def test_imported_pipeline_matches_the_bundle_and_flies(crazyflie_leapp_run, crazyflie_raw_states, tmp_path, capsys):
    from robot_rl.deploy import PolicyRuntime, load_bundle
    from robot_rl.sitl_flight import _fly_in_process

    code, line = _import(_pipeline(crazyflie_leapp_run).parent, tmp_path / "imported", capsys)  # robot from configs
    assert code == 0, line
    assert "crazyflie_2_1" in line and "4 rpyt actions at 100 Hz" in line
    bundle = load_bundle(tmp_path / "imported")  # sealed and valid as any bundle a robot loads
    assert bundle.robot == "crazyflie_2_1" and bundle.action.mode == "rpyt" and bundle.action.names == RPYT
    assert [t.inputs for t in bundle.observation] == [(k,) for k in INPUTS]
    assert sorted(s.input for s in bundle.state) == ["goal_error_integral_in", "last_action_in"]
    original, imported = PolicyRuntime(crazyflie_leapp_run / "bundle"), PolicyRuntime(bundle)
    np.testing.assert_array_equal(bundle.action.low, original.bundle.action.low)
    np.testing.assert_array_equal(bundle.action.high, original.bundle.action.high)
    scale = original.bundle.action.scale
    diffs = [np.max(np.abs(original.act(raw) - imported.act(raw)) / scale) for raw in crazyflie_raw_states]
    print(f"imported vs original bundle: max |d command| / scale {max(diffs):.2e} over {len(diffs)} steps")
    assert max(diffs) < 1e-5
    imported.reset()  # reset() restarts last action and integrator from the pipeline's initial values
    original.reset()
    raw = crazyflie_raw_states[0]
    assert np.max(np.abs(original.act(raw) - imported.act(raw)) / scale) < 1e-5

    theirs, ours = _fly_in_process(tmp_path / "imported", 5.0), _fly_in_process(crazyflie_leapp_run / "bundle", 5.0)
    print(f"in-process SITL, 5 s to (0, 0, 1): imported {theirs}, original {ours}")
    assert not theirs["crashed"]
    assert theirs["final_position_error_m"] < 0.05 and theirs["max_error_last_2s_m"] < 0.05
    assert abs(theirs["final_position_error_m"] - ours["final_position_error_m"]) < 0.005


def _trace(out: Path, inputs: list[tuple], out_names: list[str], out_kind: str | None = None) -> Path:
    """A small LEAPP pipeline traced by leapp's own API: (name, dim, kind, element_names, extra) inputs -> command."""
    import leapp
    from leapp import TensorSemantics, annotate
    from leapp.utils.tensor_description import GraphConfigs

    g = torch.Generator().manual_seed(0)
    w = torch.randn(sum(i[1] for i in inputs), len(out_names), generator=g)
    leapp.start(name=str(out / "pipe"))
    sems = [TensorSemantics(name=n, ref=torch.zeros(1, d), kind=k, element_names=e, extra=x or {})
            for n, d, k, e, x in inputs]  # fmt: skip
    ins = annotate.input_tensors("task", sems)
    x = torch.cat(list(ins) if isinstance(ins, (list, tuple)) else [ins], dim=-1)
    # each output in its own command's units: degrees within +-25, PWM about 40000 (names decide the order)
    span = torch.tensor([[40000.0 if n == "thrust_pwm" else 25.0 for n in out_names]])
    base = torch.tensor([[40000.0 if n == "thrust_pwm" else 0.0 for n in out_names]])
    y = base + torch.tanh(x @ w) * span * torch.where(base > 0, 0.3, 1.0)
    annotate.output_tensors("task", TensorSemantics(name="cmd", ref=y, kind=out_kind, element_names=out_names),
                            export_with="onnx")  # fmt: skip
    leapp.stop()
    assert leapp.compile_graph(visualize=False, graph_configs=GraphConfigs(frequency=100.0))
    return out / "pipe" / "pipe.yaml"


# Isaac Lab's names and MuJoCo's w-first quaternion; the goal as LEAPP's pose command
FOREIGN = [
    ("root_pos_w", 3, "state/body/position", ["x", "y", "z"], None),
    ("root_lin_vel_w", 3, "state/body/linear_velocity", ["x", "y", "z"], None),
    ("root_quat_w", 4, "state/body/rotation", ["w", "x", "y", "z"], None),
    ("root_ang_vel_b", 3, "state/body/angular_velocity", ["x", "y", "z"], None),
    ("goal_position", 3, "command/body/pose", ["x", "y", "z"], {"frame": "world"}),
]


def test_a_foreign_pipeline_maps_by_kinds_names_and_frames(tmp_path, capsys):
    """Inputs named as Isaac Lab does, the quaternion w first, the command thrust first: gathered in the ONNX."""
    from leapp import InferenceManager

    from robot_rl.deploy import PolicyRuntime

    order = ["thrust_pwm", "yaw_rate_deg_s", "roll_deg", "pitch_deg"]
    pipe = _trace(tmp_path, FOREIGN, order)
    code, line = _import(pipe, tmp_path / "b", capsys, "robot=crazyflie_2_1")
    assert code == 0, line
    rt = PolicyRuntime(tmp_path / "b")
    assert [t.inputs for t in rt.bundle.observation] == [(k,) for k in ("position", "velocity", "quaternion",
                                                                        "angular_velocity", "goal")]  # fmt: skip
    manager = InferenceManager(str(pipe))
    rng = np.random.default_rng(3)
    for _ in range(5):
        q = rng.normal(size=4)
        raw = {"position": rng.normal(size=3), "velocity": rng.normal(size=3), "quaternion": q / np.linalg.norm(q),
               "angular_velocity": rng.normal(size=3), "goal": rng.normal(size=3)}  # fmt: skip
        wxyz = raw["quaternion"][[3, 0, 1, 2]]
        feed = dict(
            zip(
                ("root_pos_w", "root_lin_vel_w", "root_quat_w", "root_ang_vel_b", "goal_position"),
                (raw["position"], raw["velocity"], wxyz, raw["angular_velocity"], raw["goal"]),
                strict=True,
            )
        )
        out = manager({f"task/{k}": torch.tensor(v, dtype=torch.float32)[None] for k, v in feed.items()})
        theirs = out["task/cmd"].numpy()[0]
        want = np.clip(theirs[[order.index(n) for n in RPYT]], rt.bundle.action.low, rt.bundle.action.high)
        got = rt.act(raw)
        assert np.max(np.abs(got - want) / rt.bundle.action.scale) < 1e-5


def _with(which: str, **change) -> list[tuple]:
    rows = []
    for row in FOREIGN:
        n, d, k, e, x = row
        rows.append((change.get("name", n), change.get("dim", d), change.get("kind", k), e, change.get("extra", x))
                    if n == which else row)  # fmt: skip
    return rows


@pytest.mark.parametrize(
    ("inputs", "out_names", "out_kind", "named"),
    [
        (
            _with("root_lin_vel_w", name="lin_vel"),
            RPYT,
            None,
            ["input 'lin_vel' (state/body/linear_velocity): its frame is not stated"],
        ),
        (
            _with("root_lin_vel_w", name="root_lin_vel_b"),
            RPYT,
            None,
            ["input 'root_lin_vel_b' (state/body/linear_velocity): body frame, crazyflie_2_1's velocity is in"],
        ),
        (
            [*FOREIGN, ("tof_range", 5, None, None, None)],
            RPYT,
            None,
            ["input 'tof_range': no raw input of crazyflie_2_1 means this"],
        ),
        (FOREIGN, ["m1", "m2", "m3", "m4"], None, ["command [m1, m2, m3, m4] is none of crazyflie_2_1's"]),
        (FOREIGN, RPYT, "target/joint/position", ["crazyflie_2_1 takes no target/joint/position"]),
        (
            _with("root_quat_w", kind=None, name="attitude"),
            RPYT[:3],
            None,
            ["input 'attitude': no raw input", "command [roll_deg, pitch_deg, yaw_rate_deg_s] is none"],
        ),
    ],
    ids=[
        "velocity_frame_unstated",
        "body_frame_velocity",
        "unknown_input",
        "motor_commands",
        "joint_targets",
        "two_at_once",
    ],  # fmt: skip
)
def test_unmappable_crazyflie_pipelines_are_refused_naming_each_item(tmp_path, capsys, inputs, out_names, out_kind,
                                                                     named):  # fmt: skip
    pipe = _trace(tmp_path, inputs, out_names, out_kind)
    code, line = _import(pipe, tmp_path / "b", capsys, "robot=crazyflie_2_1")
    assert code == 2, line
    assert "\n" not in line and line.startswith("robot-rl: error:")
    for item in named:
        assert item in line
    assert not (tmp_path / "b").exists()  # nothing half-written
