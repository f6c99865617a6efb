"""CPU inference time of the swarm policies: attention vs the MLP baseline, measured side by side.

Two cases: one drone per call (what a Crazyflie's controller does every tick) and a 1024-world batch
of 6-drone teams (training rollouts). Prints parameter counts, microseconds per call and the ratio.

    .venv/bin/python bench/swarm_policy_inference.py
"""

from __future__ import annotations

import time

import torch

from robot_rl.policies.swarm_attention import SwarmAttentionPolicy, SwarmMlpPolicy, parameter_count


def time_call(fn, x: torch.Tensor, repeats: int) -> float:
    with torch.inference_mode():
        for _ in range(20):
            fn(x)
        t0 = time.perf_counter()
        for _ in range(repeats):
            fn(x)
    return (time.perf_counter() - t0) / repeats


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    # attention_w32: the width-32 attention policy of docs/swarm_results.md (algo.swarm_hidden=32)
    policies = {"attention": SwarmAttentionPolicy(), "attention_w32": SwarmAttentionPolicy(hidden=32),
                "mlp": SwarmMlpPolicy()}  # fmt: skip
    one = torch.randn(1, policies["mlp"].obs_dim)
    batch = torch.randn(1024, 6 * policies["mlp"].obs_dim)
    res = {}
    for name, p in policies.items():
        p.eval()
        res[name] = (parameter_count(p), time_call(p.drone, one, 2000), time_call(p, batch, 50))
    print(f"{'policy':<14}{'params':>8}{'1 drone (us)':>16}{'1024x6 drones (ms)':>22}")
    for name, (n, t1, tb) in res.items():
        print(f"{name:<14}{n:>8}{t1 * 1e6:>16.1f}{tb * 1e3:>22.2f}")
    a, m = res["attention"], res["mlp"]
    print(f"ratio attention/mlp: params {a[0] / m[0]:.2f}, 1 drone {a[1] / m[1]:.2f}, batch {a[2] / m[2]:.2f}")
    w = res["attention_w32"]
    print(
        f"ratio attention_w32/attention: params {w[0] / a[0]:.2f}, 1 drone {w[1] / a[1]:.2f}, batch {w[2] / a[2]:.2f}"
    )


if __name__ == "__main__":
    main()
