"""Compact per-drone swarm policies -> plain C99 for a Crazyflie's STM32F405, so the policy flies fully on board.

export_c writes <name>.c and <name>.h with one function, ``void <name>(const float obs[OBS_DIM], float out[4])``,
that runs ONE drone's observation through the policy's normalization and ``drone()`` path. The weights and the
normalization buffers are ``static const float`` arrays (flash, not RAM); there is no dynamic allocation and the
only libm calls are tanhf, expf and sqrtf. Every constant is a float literal, so nothing is promoted to double
(the M4F's FPU is single precision; double would be emulated in software).

Supported: SwarmAttentionPolicy and SwarmMlpPolicy (exact types, since a subclass may change the forward pass),
with encoders/heads made of nn.Linear and nn.Tanh. Anything else is a ValueError.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from robot_rl.policies.swarm_attention import SELF_DIM, SwarmAttentionPolicy, SwarmMlpPolicy, parameter_count

ACT_DIM = 4
_C_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class OneDrone(nn.Module):
    """One drone's raw observation (..., D) -> its four outputs (..., 4): exactly what the generated C computes.

    The reference for tests and for ONNX export of the per-drone network (the full policy reshapes N drones).
    """

    def __init__(self, policy: nn.Module):
        super().__init__()
        self.policy = policy

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.policy.drone((obs - self.policy.obs_mean) / self.policy.obs_std)


def _c_float(v: float) -> str:
    # %.9g round-trips any float32; C needs a '.' or an exponent before the 'f' suffix.
    s = f"{v:.9g}"
    if not any(c in s for c in ".e"):
        s += ".0"
    return s + "f"


@dataclass
class _Emitter:
    """Collects the const arrays and counts what goes to flash, so the totals can be checked against torch."""

    arrays: list[str] = field(default_factory=list)
    param_floats: int = 0
    buffer_floats: int = 0

    def array(self, cname: str, t: torch.Tensor, *, buffer: bool = False) -> str:
        values = t.detach().cpu().to(torch.float32).reshape(-1).numpy()
        if not np.all(np.isfinite(values)):
            raise ValueError(f"{cname}: non-finite values cannot be exported")
        lines = [", ".join(_c_float(float(v)) for v in values[i : i + 6]) for i in range(0, len(values), 6)]
        body = ",\n    ".join(lines)
        self.arrays.append(f"static const float {cname}[{len(values)}] = {{\n    {body}\n}};")
        if buffer:
            self.buffer_floats += len(values)
        else:
            self.param_floats += len(values)
        return cname


def _chain(em: _Emitter, seq: nn.Module, prefix: str, src: str, n_in: int, dst: str, n_out: int) -> list[str]:
    """C statements for an nn.Sequential of Linear/Tanh reading src[n_in] and leaving its result in dst[n_out]."""
    if not isinstance(seq, nn.Sequential):
        raise ValueError(f"{prefix}: expected nn.Sequential of Linear/Tanh, got {type(seq).__name__}")
    linears = [i for i, m in enumerate(seq) if isinstance(m, nn.Linear)]
    if not linears:
        raise ValueError(f"{prefix}: no nn.Linear layer")
    lines, cur, size = [], src, n_in
    for i, m in enumerate(seq):
        if isinstance(m, nn.Linear):
            if m.in_features != size:
                raise ValueError(f"{prefix}.{i}: expects {m.in_features} inputs, gets {size}")
            w = em.array(f"{prefix.upper()}_{i}_W", m.weight)
            b = em.array(f"{prefix.upper()}_{i}_B", m.bias) if m.bias is not None else "NULL"
            if i == linears[-1]:
                nxt = dst
            else:
                nxt = f"{prefix}_h{i}"
                lines.append(f"float {nxt}[{m.out_features}];")
            lines.append(f"dense({w}, {b}, {m.in_features}, {m.out_features}, {cur}, {nxt});")
            cur, size = nxt, m.out_features
        elif isinstance(m, nn.Tanh):
            if cur == src:  # never write into the caller's (const) input
                raise ValueError(f"{prefix}.{i}: Tanh before the first Linear is not supported")
            lines.append(f"tanh_inplace({cur}, {size});")
        else:
            raise ValueError(f"{prefix}.{i}: unsupported layer {type(m).__name__} (only Linear and Tanh)")
    if size != n_out:
        raise ValueError(f"{prefix}: produces {size} values, {n_out} expected")
    return lines


def _no_bias_linear(em: _Emitter, m: nn.Module, cname: str, hidden: int) -> str:
    if not isinstance(m, nn.Linear) or m.bias is not None or tuple(m.weight.shape) != (hidden, hidden):
        raise ValueError(f"{cname}: expected nn.Linear({hidden}, {hidden}, bias=False)")
    return em.array(cname, m.weight)


def _attention_body(em: _Emitter, p: SwarmAttentionPolicy) -> tuple[list[str], set[str]]:
    hidden, n_nb = p.wq.in_features, p.n_nb
    n_beams = p.obs_dim - SELF_DIM - n_nb
    norm = p.norm
    if not isinstance(norm, nn.LayerNorm) or norm.weight is None or norm.bias is None:
        raise ValueError("norm: expected nn.LayerNorm with elementwise affine weight and bias")
    if tuple(norm.normalized_shape) != (hidden,):
        raise ValueError(f"norm: expected LayerNorm({hidden})")
    lines = [f"float s[{hidden}], tok[2][{hidden}], q[2][{hidden}], k[2][{hidden}], v[2][{hidden}];"]
    lines.append(f"float cat[{3 * hidden}];")
    # Token order as in drone(): [neighbour, obstacle]; the self encoding bypasses attention.
    lines += _chain(em, p.self_enc, "self_enc", "x", SELF_DIM, "s", hidden)
    lines += _chain(em, p.neighbour_enc, "neighbour_enc", f"x + {SELF_DIM}", n_nb, "tok[0]", hidden)
    lines += _chain(em, p.obstacle_enc, "obstacle_enc", f"x + {SELF_DIM + n_nb}", n_beams, "tok[1]", hidden)
    wq, wk, wv = (_no_bias_linear(em, getattr(p, n), n.upper(), hidden) for n in ("wq", "wk", "wv"))
    wfc = _no_bias_linear(em, p.wfc, "WFC", hidden)
    gamma, beta = em.array("LN_GAMMA", norm.weight), em.array("LN_BETA", norm.bias)
    scale = _c_float(float(np.float32(p.scale)))
    eps = _c_float(float(np.float32(norm.eps)))
    lines += [
        "for (t = 0; t < 2; ++t) {",
        f"    dense({wq}, NULL, {hidden}, {hidden}, tok[t], q[t]);",
        f"    dense({wk}, NULL, {hidden}, {hidden}, tok[t], k[t]);",
        f"    dense({wv}, NULL, {hidden}, {hidden}, tok[t], v[t]);",
        "}",
        f"for (i = 0; i < {hidden}; ++i) cat[i] = s[i];",
        "for (t = 0; t < 2; ++t) {",
        "    /* softmax over the two keys, max-subtracted as torch.softmax does */",
        f"    float ctx[{hidden}], res[{hidden}], a0, a1, m, e0, e1;",
        f"    a0 = dot(q[t], k[0], {hidden}) * {scale};",
        f"    a1 = dot(q[t], k[1], {hidden}) * {scale};",
        "    m = a0 > a1 ? a0 : a1;",
        "    e0 = expf(a0 - m);",
        "    e1 = expf(a1 - m);",
        "    a0 = e0 / (e0 + e1);",
        "    a1 = e1 / (e0 + e1);",
        f"    for (i = 0; i < {hidden}; ++i) ctx[i] = a0 * v[0][i] + a1 * v[1][i];",
        f"    dense({wfc}, NULL, {hidden}, {hidden}, ctx, res);",
        "    /* residual inside the LayerNorm: norm(token + Wfc(attn @ v)) */",
        f"    for (i = 0; i < {hidden}; ++i) res[i] += tok[t][i];",
        f"    layer_norm(res, {gamma}, {beta}, {hidden}, {eps}, cat + {hidden} + {hidden} * t);",
        "}",
    ]
    lines += _chain(em, p.head, "head", "cat", 3 * hidden, "out", ACT_DIM)
    return lines, {"dense", "tanh_inplace", "dot", "layer_norm"}


_HELPERS = {
    "dense": """\
/* y[o] = b[o] + sum_i w[o][i] x[i]; w row-major (out, in) as torch stores it; b may be NULL. */
static void dense(const float *w, const float *b, int n_in, int n_out, const float *x, float *y)
{
    int o, i;
    for (o = 0; o < n_out; ++o) {
        float acc = b ? b[o] : 0.0f;
        for (i = 0; i < n_in; ++i) acc += w[o * n_in + i] * x[i];
        y[o] = acc;
    }
}""",
    "tanh_inplace": """\
static void tanh_inplace(float *x, int n)
{
    int i;
    for (i = 0; i < n; ++i) x[i] = tanhf(x[i]);
}""",
    "dot": """\
static float dot(const float *a, const float *b, int n)
{
    float acc = 0.0f;
    int i;
    for (i = 0; i < n; ++i) acc += a[i] * b[i];
    return acc;
}""",
    "layer_norm": """\
/* torch.nn.LayerNorm over n values: biased variance, eps inside the square root. */
static void layer_norm(const float *x, const float *gamma, const float *beta, int n, float eps, float *y)
{
    float mean = 0.0f, var = 0.0f, inv;
    int i;
    for (i = 0; i < n; ++i) mean += x[i];
    mean /= (float)n;
    for (i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
    var /= (float)n;
    inv = 1.0f / sqrtf(var + eps);
    for (i = 0; i < n; ++i) y[i] = (x[i] - mean) * inv * gamma[i] + beta[i];
}""",
}


def export_c(policy: nn.Module, out_dir: Path, name: str = "robot_rl_policy") -> dict:
    """Write <name>.c and <name>.h for one drone's forward pass (normalization included).

    Returns {"parameters": float parameters exported (== parameter_count(policy)),
    "flash_bytes": bytes of the static const float arrays = 4 * (parameters + 2 * obs_dim), i.e. weights,
    biases, LayerNorm gamma/beta, obs_mean and obs_std; code and the two scalar constants (attention scale,
    LayerNorm eps, inlined as literals) are not counted, "obs_dim": D, "files": [c path, h path]}.
    """
    if type(policy) not in (SwarmAttentionPolicy, SwarmMlpPolicy):
        raise ValueError(f"export_c supports SwarmAttentionPolicy and SwarmMlpPolicy, not {type(policy).__name__}")
    if not _C_IDENT.match(name):
        raise ValueError(f"name {name!r} is not a C identifier")
    buffers = {n for n, _ in policy.named_buffers()}
    if buffers != {"obs_mean", "obs_std"}:
        raise ValueError(
            f"unexpected buffers {sorted(buffers - {'obs_mean', 'obs_std'})}: the C export would drop them"
        )
    if bool((policy.obs_std == 0).any()):
        raise ValueError("obs_std contains zeros: the normalization would divide by zero")

    obs_dim = policy.obs_dim
    em = _Emitter()
    em.array("OBS_MEAN", policy.obs_mean, buffer=True)
    em.array("OBS_STD", policy.obs_std, buffer=True)
    if isinstance(policy, SwarmAttentionPolicy):
        body, helpers = _attention_body(em, policy)
    else:
        body, helpers = _chain(em, policy.net, "net", "x", obs_dim, "out", ACT_DIM), {"dense", "tanh_inplace"}
    # Anything trainable we did not emit would silently be missing on board.
    if em.param_floats != parameter_count(policy):
        raise ValueError(f"exported {em.param_floats} parameters, the module has {parameter_count(policy)}")

    macro = name.upper()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    kind = type(policy).__name__
    header = f"""\
/* Generated by robot_rl.export.c_export from a {kind}; do not edit. */
#ifndef {macro}_H
#define {macro}_H

#define {macro}_OBS_DIM {obs_dim}
#define {macro}_ACT_DIM {ACT_DIM}
#define {macro}_PARAMETERS {em.param_floats}

#ifdef __cplusplus
extern "C" {{
#endif

/* One drone's raw observation (layout as sim.tasks.crazyflie.swarm: self {SELF_DIM}, neighbours, ToF zones)
 * -> 4 raw policy outputs. Normalization is applied inside. Outputs are NOT clamped: the simulator maps
 * them to motor commands as clamp(0.5 + 0.5 * out, 0, 1). Reentrant: all state is on the stack. */
void {name}(const float obs[{macro}_OBS_DIM], float out[{macro}_ACT_DIM]);

#ifdef __cplusplus
}}
#endif

#endif /* {macro}_H */
"""
    helper_src = "\n\n".join(_HELPERS[h] for h in _HELPERS if h in helpers)
    body_src = "\n".join("    " + line for line in body)
    flash_bytes = 4 * (em.param_floats + em.buffer_floats)
    source = f"""\
/* Generated by robot_rl.export.c_export from a {kind}; do not edit.
 * {em.param_floats} parameters + {em.buffer_floats} normalization floats = {flash_bytes} bytes of const data.
 * C99, no dynamic allocation, libm: tanhf/expf/sqrtf only. */
#include <math.h>
#include <stddef.h>

#include "{name}.h"

{chr(10).join(em.arrays)}

{helper_src}

void {name}(const float obs[{macro}_OBS_DIM], float out[{macro}_ACT_DIM])
{{
    float x[{macro}_OBS_DIM];
    int i{", t" if isinstance(policy, SwarmAttentionPolicy) else ""};
    for (i = 0; i < {macro}_OBS_DIM; ++i) x[i] = (obs[i] - OBS_MEAN[i]) / OBS_STD[i];
{body_src}
}}
"""
    c_path, h_path = out_dir / f"{name}.c", out_dir / f"{name}.h"
    c_path.write_text(source)
    h_path.write_text(header)
    return {
        "parameters": em.param_floats,
        "flash_bytes": flash_bytes,
        "obs_dim": obs_dim,
        "files": [str(c_path), str(h_path)],
    }
