"""A LEAPP pipeline read as data: the YAML leapp.compile_graph writes, its ONNX stages and feedback initial values.

Read with yaml.safe_load (as leapp's InferenceManager does), stage files checked against their sha256, initial
values through safetensors' numpy loader; nothing is executed. Stages exported as TorchScript or torch.export
programs are refused: loading those runs code.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from robot_rl.interop.errors import InteropError


@dataclass(frozen=True)
class Port:
    """One input or output of a stage, with its semantic metadata."""

    name: str
    shape: tuple[int, ...]
    kind: str | None
    element_names: tuple[str, ...] | None  # the names along the last axis, where given
    extra: dict = field(default_factory=dict)

    @property
    def dim(self) -> int:
        return int(self.shape[-1]) if self.shape else 1


@dataclass
class LeappPipeline:
    path: Path
    stage: str
    onnx_path: Path
    inputs: list[Port]  # the stage's inputs in its ONNX order (external and feedback)
    outputs: list[Port]
    external_inputs: list[str]
    external_outputs: list[str]
    feedback: dict[str, str]  # output name -> the input it feeds next step
    initial: dict[str, np.ndarray]  # input name -> initial value (feedback inputs)
    configs: dict
    versions: dict


def _port(d: dict) -> Port:
    shape = tuple(int(x) for x in (yaml.safe_load(d["shape"]) if isinstance(d["shape"], str) else d["shape"]))
    names = d.get("element_names")
    last = None
    if isinstance(names, list):  # per-axis lists: take the one naming the last axis
        axes = [a for a in names if isinstance(a, list) and shape and len(a) == shape[-1]]
        last = tuple(str(x) for x in axes[-1]) if axes else None
    known = {"name", "dtype", "shape", "type", "kind", "element_names"}
    return Port(str(d["name"]), shape, d.get("kind"), last, {k: v for k, v in d.items() if k not in known})


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_pipeline(path: str | Path) -> LeappPipeline:
    """Read and check a pipeline YAML (or the directory holding exactly one). Raises InteropError."""
    path = Path(path)
    if path.is_dir():
        found = sorted(path.glob("*.yaml"))
        if len(found) != 1:
            raise InteropError(f"{path}: expected one LEAPP pipeline YAML, found {len(found)}")
        path = found[0]
    try:
        doc = yaml.safe_load(path.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise InteropError(f"{path} is not a LEAPP pipeline (not YAML: {' '.join(str(e).split())[:120]})") from None
    if not isinstance(doc, dict) or not {"models", "pipeline"} <= doc.keys():
        raise InteropError(f"{path} is not a LEAPP pipeline (no models: and pipeline: sections)")
    models, pipe = doc["models"], doc["pipeline"]
    if len(models) != 1:
        # Isaac Lab and our export write one node; chaining several ONNX stages is not implemented yet
        raise InteropError(f"{path}: {len(models)} stages ({', '.join(models)}); import reads single-stage pipelines")
    ((stage, desc),) = models.items()
    params = desc.get("parameters") or {}
    if params.get("backend") != "onnx":
        raise InteropError(
            f"{path}: stage '{stage}' is exported as {params.get('backend')!r}; import reads ONNX stages only "
            "(TorchScript and torch.export programs are code, which a loaded file must not run)"
        )
    onnx_path = (path.parent / str(params["model_path"])).resolve()
    if not onnx_path.is_file():
        raise InteropError(f"{path}: stage file {onnx_path} is missing")
    if _sha256(onnx_path) != params.get("sha256sum"):
        raise InteropError(f"{path}: {onnx_path.name} does not match the pipeline's sha256sum: refused")
    feedback = {}
    for src, targets in (pipe.get("feedback_flow") or {}).items():
        for t in targets:
            feedback[src.split("/", 1)[1]] = t.split("/", 1)[1]
    initial = {}
    if pipe.get("initial_values"):
        from safetensors.numpy import load_file  # tensors as data, no pickle

        for key, value in load_file(str(path.parent / str(pipe["initial_values"]))).items():
            initial[key.split("/", 1)[1]] = np.asarray(value, dtype=np.float64)
    return LeappPipeline(
        path=path,
        stage=str(stage),
        onnx_path=onnx_path,
        inputs=[_port(d) for d in desc["inputs"]],
        outputs=[_port(d) for d in desc["outputs"]],
        external_inputs=[str(x) for x in (pipe.get("inputs") or {}).get(stage, [])],
        external_outputs=[str(x) for x in (pipe.get("outputs") or {}).get(stage, [])],
        feedback=feedback,
        initial=initial,
        configs=dict(pipe.get("configs") or {}),
        versions=dict(doc.get("system information") or {}),
    )
