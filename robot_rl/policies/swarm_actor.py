"""The swarm policies as rsl_rl actors: one shared-weight network per drone, trained by our PPO.

rsl_rl builds its actor from ``class_name`` (PPO.construct_algorithm). SwarmActorModel is an rsl_rl
MLPModel whose two pieces are swapped:
- ``mlp``: SwarmAttentionPolicy (or SwarmMlpPolicy) ``drone()`` applied to each of the N drones;
- ``obs_normalizer``: rsl_rl's EmpiricalNormalization over ONE drone's D observations, its statistics
  pooled over all drones (shared weights need shared statistics, and the on-board network has D of them).
Everything else is MLPModel's: forward, the Gaussian action distribution (one std per action, N x 4),
log-probabilities, KL, normalizer updates, ONNX/JIT wrappers.

extract_policy() turns the trained actor (or a checkpoint) back into a plain SwarmAttentionPolicy /
SwarmMlpPolicy with the normalization in its obs_mean / obs_std buffers, which c_export writes to C.
"""

from __future__ import annotations

import copy
from pathlib import Path

import torch
from rsl_rl.models import MLPModel
from rsl_rl.modules import EmpiricalNormalization
from rsl_rl.utils import resolve_class
from torch import nn

from robot_rl.policies.swarm_attention import SwarmAttentionPolicy, SwarmMlpPolicy

POLICIES = {"swarm_attention": SwarmAttentionPolicy, "swarm_mlp": SwarmMlpPolicy}
CLASS_NAME = "robot_rl.policies.swarm_actor:SwarmActorModel"


class PerDroneNormalization(nn.Module):
    """Empirical mean/std of one drone's observation (D), applied to (..., N * D) drone-major observations."""

    def __init__(self, obs_dim: int, num_drones: int):
        super().__init__()
        self.obs_dim, self.num_drones = obs_dim, num_drones
        self.norm = EmpiricalNormalization(obs_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x.reshape(*x.shape[:-1], self.num_drones, self.obs_dim)).flatten(-2)

    def update(self, x: torch.Tensor) -> None:
        self.norm.update(x.reshape(-1, self.obs_dim))

    # the policy bundle records the normalizer of the whole (N * D) observation
    @property
    def mean(self) -> torch.Tensor:
        return self.norm.mean.repeat(self.num_drones)

    @property
    def std(self) -> torch.Tensor:
        return (self.norm.std + self.norm.eps).repeat(self.num_drones)


class SharedDrones(nn.Module):
    """policy.drone() on each drone's (already normalized) observation: (..., N * D) -> (..., N * 4)."""

    def __init__(self, policy: SwarmAttentionPolicy | SwarmMlpPolicy):
        super().__init__()
        self.policy = policy

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p = self.policy
        return p.drone(x.reshape(*x.shape[:-1], p.num_drones, p.obs_dim)).flatten(-2)


class SwarmActorModel(MLPModel):
    """rsl_rl actor model: a per-drone swarm policy with shared weights (see the module docstring)."""

    def __init__(
        self,
        obs,
        obs_groups: dict[str, list[str]],
        obs_set: str,
        output_dim: int,
        policy: str = "swarm_attention",
        num_drones: int = 6,
        k_neighbours: int = 2,
        num_beams: int = 32,
        hidden: int | None = None,
        obs_normalization: bool = True,
        distribution_cfg: dict | None = None,
    ) -> None:
        nn.Module.__init__(self)  # not MLPModel.__init__: it would build an MLP we replace
        self.obs_groups, self.obs_dim = self._get_obs_dim(obs, obs_groups, obs_set)
        width = {} if hidden is None else {"hidden": int(hidden)}  # None: the policy class's own width
        net = POLICIES[policy](num_drones=num_drones, k_neighbours=k_neighbours, num_beams=num_beams, **width)
        if self.obs_dim != num_drones * net.obs_dim or output_dim != 4 * num_drones:
            raise ValueError(
                f"{policy}: {num_drones} drones x {net.obs_dim} obs -> 4 actions each does not match the env's "
                f"{self.obs_dim} observations and {output_dim} actions"
            )
        self.obs_normalization = obs_normalization
        self.obs_normalizer = PerDroneNormalization(net.obs_dim, num_drones) if obs_normalization else nn.Identity()
        self.distribution = None
        if distribution_cfg is not None:
            dist_class, dist_cfg = resolve_class(distribution_cfg)
            self.distribution = dist_class(output_dim, **dist_cfg)
            if self.distribution.input_dim != output_dim:
                raise ValueError("swarm actors output the action mean only (a state-independent std distribution)")
        self.mlp = SharedDrones(net)


def actor_config(algo: dict, task, distribution_cfg: dict) -> dict:
    """rsl_rl's actor config for our algo group's `actor: swarm_attention | swarm_mlp` on a swarm task."""
    return {
        "class_name": CLASS_NAME,
        "policy": str(algo["actor"]),
        # per_drone: PPO's environments are single drones (robot_rl.envs.PerDroneEnv); same per-drone weights
        "num_drones": 1 if algo.get("per_drone", False) else int(task.num_drones),
        "k_neighbours": int(task.k_neighbours),
        "num_beams": int(task.num_beams),
        "hidden": None if algo.get("swarm_hidden") is None else int(algo["swarm_hidden"]),
        "obs_normalization": True,
        "distribution_cfg": distribution_cfg,
    }


def extract_policy(actor: SwarmActorModel) -> SwarmAttentionPolicy | SwarmMlpPolicy:
    """The trained actor's deterministic path as a stand-alone policy (normalization in its buffers)."""
    net = copy.deepcopy(actor.mlp.policy).cpu().eval()
    if isinstance(actor.obs_normalizer, PerDroneNormalization):
        norm = actor.obs_normalizer.norm
        with torch.no_grad():
            net.obs_mean.copy_(norm.mean)
            net.obs_std.copy_(norm.std + norm.eps)  # EmpiricalNormalization divides by std + eps
    return net


def policy_from_checkpoint(path: Path | str, num_drones: int | None = None) -> SwarmAttentionPolicy | SwarmMlpPolicy:
    """A stand-alone swarm policy from a robot_rl checkpoint of a swarm actor (no env needed).

    num_drones: the team size it will fly (default: the training actor's; a per-drone run's actor has 1)."""
    from robot_rl.training.checkpoint import load_checkpoint

    d = load_checkpoint(Path(path))
    cfg = d.get("actor_cfg") or {}
    if cfg.get("class_name") != CLASS_NAME:
        raise ValueError(f"{path}: not a swarm actor checkpoint (actor {cfg.get('class_name', 'MLPModel')})")
    width = {} if cfg.get("hidden") is None else {"hidden": int(cfg["hidden"])}
    drones = cfg["num_drones"] if num_drones is None else int(num_drones)
    net = POLICIES[cfg["policy"]](
        num_drones=drones, k_neighbours=cfg["k_neighbours"], num_beams=cfg["num_beams"], **width
    )
    state = d["actor_state_dict"]
    net.load_state_dict({k.removeprefix("mlp.policy."): v for k, v in state.items() if k.startswith("mlp.policy.")})
    if "obs_normalizer.norm._mean" in state:
        eps = EmpiricalNormalization(1).eps
        with torch.no_grad():
            net.obs_mean.copy_(state["obs_normalizer.norm._mean"].squeeze(0))
            net.obs_std.copy_(state["obs_normalizer.norm._std"].squeeze(0) + eps)
    return net.eval()
