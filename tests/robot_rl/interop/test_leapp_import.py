"""robot-rl import of LEAPP pipelines: ours round-trips to the same commands; what cannot be mapped is refused."""

from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("leapp")

from robot_rl.cli import main  # noqa: E402
from sim.tasks.quadruped.constants import JOINT_NAMES  # noqa: E402


def _import(pipeline: Path, out: Path, capsys) -> tuple[int, str]:
    capsys.readouterr()  # drop what tracing printed: what follows is the command's own output
    code = main(["import", str(pipeline), f"out={out}"])
    captured = capsys.readouterr()
    return code, captured.err.strip() or captured.out.strip()


def test_our_pipeline_imports_back_to_the_same_commands(quadruped_leapp_run, quadruped_raw_states, tmp_path, capsys):
    from robot_rl.deploy import PolicyRuntime, load_bundle

    code, line = _import(quadruped_leapp_run / "leapp" / "quadruped_velocity", tmp_path / "imported", capsys)
    assert code == 0, line
    bundle = load_bundle(tmp_path / "imported")  # sealed and valid as any bundle a robot loads
    assert [s.input for s in bundle.state] == ["last_action_in"]  # the pipeline's feedback, kept by the runtime
    assert bundle.extra["servo"]["kp"] > 0  # the gains travel in the pipeline's configs: the leg safety node arms
    original, imported = PolicyRuntime(quadruped_leapp_run / "bundle"), PolicyRuntime(bundle)
    diffs = [np.max(np.abs(original.act(raw) - imported.act(raw))) for raw in quadruped_raw_states]
    assert max(diffs) < 1e-5
    imported.reset()  # reset() restarts the state as the pipeline's initial values say
    original.reset()
    raw = quadruped_raw_states[0]
    assert np.max(np.abs(original.act(raw) - imported.act(raw))) < 1e-5


def _trace(out: Path, joint_names: list[str], extra_input: str | None, n_out: int) -> Path:
    """A small LEAPP pipeline traced by leapp's own API: joint positions (+ another input) -> joint targets."""
    import leapp
    from leapp import TensorSemantics, annotate
    from leapp.utils.tensor_description import GraphConfigs

    g = torch.Generator().manual_seed(0)
    w = torch.randn(len(joint_names) + (5 if extra_input else 0), n_out, generator=g)
    leapp.start(name=str(out / "pipe"))
    sems = [TensorSemantics(name="joint_pos", ref=torch.zeros(1, len(joint_names)), kind="state/joint/position",
                            element_names=joint_names)]  # fmt: skip
    if extra_input:
        sems.append(TensorSemantics(name=extra_input, ref=torch.zeros(1, 5)))
    ins = annotate.input_tensors("task", sems)
    x = torch.cat(list(ins) if isinstance(ins, (list, tuple)) else [ins], dim=-1)
    y = torch.tanh(x @ w)
    names = [f"{j}_joint" for j in JOINT_NAMES][:n_out] + [f"extra_{i}" for i in range(n_out - 12)]
    annotate.output_tensors("task", TensorSemantics(name="joint_pos_target", ref=y, kind="target/joint/position",
                                                    element_names=names), export_with="onnx")  # fmt: skip
    leapp.stop()
    assert leapp.compile_graph(visualize=False, graph_configs=GraphConfigs(frequency=50.0))
    return out / "pipe" / "pipe.yaml"


def test_a_foreign_pipeline_in_another_joint_order_imports(tmp_path, capsys):
    """Joints named as URDFs do (FR_hip_joint), listed leg by leg in another order: reordered inside the ONNX."""
    from robot_rl.deploy import PolicyRuntime

    order = [f"{j}_joint" for j in sorted(JOINT_NAMES)]
    pipe = _trace(tmp_path, order, None, 12)
    code, line = _import(pipe, tmp_path / "b", capsys)
    assert code == 0, line
    rt = PolicyRuntime(tmp_path / "b")
    q = np.random.default_rng(1).uniform(-0.5, 0.5, 12)
    from leapp import InferenceManager

    q_theirs = torch.tensor(q[[JOINT_NAMES.index(n[: -len("_joint")]) for n in order]], dtype=torch.float32)
    expected = InferenceManager(str(pipe))({"task/joint_pos": q_theirs[None]})
    got = rt.act({"joint_position": q})
    # the pipeline's targets are in our order already (output names = ours); the input was permuted for it
    want = np.clip(expected["task/joint_pos_target"].numpy()[0], rt.bundle.action.low, rt.bundle.action.high)
    assert np.max(np.abs(got - want)) < 1e-5


@pytest.mark.parametrize(
    ("joints", "extra_input", "n_out", "named"),
    [
        ([*JOINT_NAMES[:-1], "tail_joint"], None, 12, ["unknown joint 'tail_joint'", "no joint 'RL_calf'"]),
        (JOINT_NAMES, "height_scan", 12, ["input 'height_scan': no raw input of go1_like means this"]),
        (JOINT_NAMES, None, 8, ["action size 8, go1_like has 12 joints"]),
    ],
    ids=["unknown_joint", "missing_observation_term", "action_size"],
)
def test_unmappable_pipelines_are_refused_naming_each_item(tmp_path, capsys, joints, extra_input, n_out, named):
    pipe = _trace(tmp_path, list(joints), extra_input, n_out)
    code, line = _import(pipe, tmp_path / "b", capsys)
    assert code == 2
    assert "\n" not in line and line.startswith("robot-rl: error:")
    for item in named:
        assert item in line
    assert not (tmp_path / "b").exists()  # nothing half-written


def test_torchscript_stages_are_refused_unread(quadruped_leapp_run, tmp_path, capsys):
    import shutil

    import yaml

    src = quadruped_leapp_run / "leapp" / "quadruped_velocity"
    dst = tmp_path / "p"
    shutil.copytree(src, dst)
    doc_path = dst / "quadruped_velocity.yaml"
    doc = yaml.safe_load(doc_path.read_text())
    doc["models"]["policy"]["parameters"]["backend"] = "jit"  # what a TorchScript export says
    doc_path.write_text(yaml.safe_dump(doc))
    code, line = _import(dst, tmp_path / "b", capsys)
    assert code == 2 and "'jit'" in line and "ONNX stages only" in line
