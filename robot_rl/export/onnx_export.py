"""Policy modules as ONNX: what every bundle's policy.onnx is made with."""

from __future__ import annotations

import copy
from pathlib import Path

import torch


class _ExportedActor(torch.nn.Module):
    """Normalizer + MLP, deterministic mean action: what runs on the robot."""

    def __init__(self, actor):
        super().__init__()
        self.normalizer = copy.deepcopy(actor.obs_normalizer).cpu().eval()
        self.mlp = copy.deepcopy(actor.mlp).cpu().eval()

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.normalizer(obs))


def deterministic_actor(actor) -> torch.nn.Module:
    """A CPU copy of an rsl_rl actor's normalizer + MLP in eval mode (the mean action)."""
    return _ExportedActor(actor)


def export_onnx(actor, obs_dim: int, path: Path) -> None:
    """An rsl_rl actor (normalizer + MLP) as ONNX."""
    export_module_onnx(_ExportedActor(actor), obs_dim, path)


def export_module_onnx(model: torch.nn.Module, obs_dim: int, path: Path) -> None:
    """ONNX of a policy module: input 'obs' (batch, obs_dim) float32, output 'actions' (batch, ...), opset 18."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.onnx.export(
        model.eval(),
        (torch.zeros(1, obs_dim),),
        str(path),
        input_names=["obs"],
        output_names=["actions"],
        dynamic_axes={"obs": {0: "batch"}, "actions": {0: "batch"}},
        opset_version=18,
        dynamo=False,
    )
