"""Put a foreign policy network behind our bundle's interface: one `obs` input in our layout order, one `actions`
output in our joint order and policy scale. The network's graph is kept as it is; nodes are added around it:
slices (and gathers, where joint or quaternion orders differ) feed its inputs from `obs`, a gather and an affine
map turn its command output into `actions`. Inputs the wrapper does not feed (recurrent state) stay inputs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


@dataclass(frozen=True)
class Block:
    """obs[offset : offset + dim], reordered by gather (gather[i]: the obs element the network's i-th reads)."""

    offset: int
    dim: int
    gather: tuple[int, ...] | None = None


def _const(graph: onnx.GraphProto, name: str, value: np.ndarray) -> str:
    graph.initializer.append(numpy_helper.from_array(value, name))
    return name


def _feed(graph: onnx.GraphProto, target: str, blocks: list[Block]) -> list[onnx.NodeProto]:
    nodes, parts = [], []
    for i, b in enumerate(blocks):
        tag = f"rr_{target}_{i}"
        starts = _const(graph, f"{tag}_start", np.array([b.offset], np.int64))
        ends = _const(graph, f"{tag}_end", np.array([b.offset + b.dim], np.int64))
        axes = _const(graph, f"{tag}_axis", np.array([1], np.int64))
        out = f"{tag}_slice"
        nodes.append(helper.make_node("Slice", ["obs", starts, ends, axes], [out], name=out))
        if b.gather is not None:
            idx = _const(graph, f"{tag}_order", np.array(b.gather, np.int64))
            nodes.append(helper.make_node("Gather", [out, idx], [f"{tag}_gather"], axis=1, name=f"{tag}_gather"))
            out = f"{tag}_gather"
        parts.append(out)
    if len(parts) == 1:
        nodes.append(helper.make_node("Identity", parts, [target], name=f"rr_{target}_feed"))
    else:
        nodes.append(helper.make_node("Concat", parts, [target], axis=1, name=f"rr_{target}_feed"))
    return nodes


def _rename(g: onnx.GraphProto, old: str, new: str) -> None:
    """Rename a tensor of the network everywhere it appears (its own `obs` or `actions` would collide with ours)."""
    for n in g.node:
        n.input[:] = [new if x == old else x for x in n.input]
        n.output[:] = [new if x == old else x for x in n.output]
    for v in list(g.input) + list(g.output):
        if v.name == old:
            v.name = new


def wrap_policy(
    model: onnx.ModelProto,
    feeds: dict[str, list[Block]],
    obs_dim: int,
    output: str,
    order: list[int] | None,
    sub: np.ndarray,
    div: np.ndarray,
) -> onnx.ModelProto:
    """The network with input `obs` (1, obs_dim) feeding `feeds` (its input name -> blocks of obs) and output
    `actions` = (output[:, order] - sub) / div first, its other outputs (state) after it."""
    model = onnx.ModelProto.FromString(model.SerializeToString())  # a copy: the caller's model stays as it was
    g = model.graph
    for ours in ("obs", "actions"):
        if ours in feeds or ours == output:
            _rename(g, ours, f"rr_net_{ours}")
            feeds = {(f"rr_net_{ours}" if k == ours else k): v for k, v in feeds.items()}
            output = f"rr_net_{ours}" if output == ours else output
    fed = set(feeds)
    kept_inputs = [i for i in g.input if i.name not in fed]
    pre = [n for target, blocks in feeds.items() for n in _feed(g, target, blocks)]
    post_in = output
    post = []
    if order is not None:
        idx = _const(g, "rr_action_order", np.array(order, np.int64))
        post.append(helper.make_node("Gather", [output, idx], ["rr_action_ordered"], axis=1, name="rr_action_order"))
        post_in = "rr_action_ordered"
    sub_c = _const(g, "rr_action_sub", np.asarray(sub, np.float32).reshape(1, -1))
    div_c = _const(g, "rr_action_div", np.asarray(div, np.float32).reshape(1, -1))
    post.append(helper.make_node("Sub", [post_in, sub_c], ["rr_action_centred"], name="rr_action_sub"))
    post.append(helper.make_node("Div", ["rr_action_centred", div_c], ["actions"], name="rr_action_div"))
    nodes = pre + list(g.node) + post
    del g.node[:]
    g.node.extend(nodes)
    n_act = len(sub)
    obs = helper.make_tensor_value_info("obs", TensorProto.FLOAT, [1, obs_dim])
    del g.input[:]
    g.input.extend([obs, *kept_inputs])
    actions = helper.make_tensor_value_info("actions", TensorProto.FLOAT, [1, n_act])
    rest = [o for o in g.output if o.name != output]
    del g.output[:]
    g.output.extend([actions, *rest])
    onnx.checker.check_model(model)
    return model
