"""Actors and critics of the off-policy learners.

The actor is what leaves the simulator: `obs_normalizer` (rsl_rl's EmpiricalNormalization, the running
observation statistics) and `mlp` (normalized observation -> deterministic action in [-1, 1], a tanh at
the end), the two attributes robot_rl.export reads, so its bundle is the same as PPO's. Called with the
env's observation TensorDict it reads the "policy" group.
"""

from __future__ import annotations

import torch
from rsl_rl.modules import EmpiricalNormalization
from torch import nn


def mlp(in_dim: int, hidden: list[int], out_dim: int, layer_norm: bool = False) -> nn.Sequential:
    layers: list[nn.Module] = []
    for h in hidden:
        layers += [nn.Linear(in_dim, h), *([nn.LayerNorm(h)] if layer_norm else []), nn.ReLU()]
        in_dim = h
    layers.append(nn.Linear(in_dim, out_dim))
    return nn.Sequential(*layers)


def policy_obs(obs) -> torch.Tensor:
    """The "policy" group of an observation TensorDict, or the tensor itself."""
    return obs if isinstance(obs, torch.Tensor) else obs["policy"]


class Actor(nn.Module):
    """Deterministic actor (TD3), and the exported form of SAC's: tanh(mean)."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: list[int], normalize: bool, init_scale: float):
        super().__init__()
        self.obs_normalizer = EmpiricalNormalization(obs_dim) if normalize else nn.Identity()
        self.mlp = nn.Sequential(*mlp(obs_dim, hidden, act_dim), nn.Tanh())
        with torch.no_grad():  # near-zero actions first: for a drone the hover command
            self.head.weight.mul_(init_scale)
            self.head.bias.zero_()

    @property
    def head(self) -> nn.Linear:
        return self.mlp[-2]

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The trunk's output for normalized observations (SAC's log-std head reads it too)."""
        return self.mlp[:-2](x)

    def forward(self, obs) -> torch.Tensor:
        return self.mlp(self.obs_normalizer(policy_obs(obs)))


class GaussianActor(Actor):
    """SAC's tanh-Gaussian: the mean is the Actor's head, a second head gives the log-std."""

    def __init__(self, obs_dim, act_dim, hidden, normalize, init_scale, log_std_min: float, log_std_max: float):
        super().__init__(obs_dim, act_dim, hidden, normalize, init_scale)
        self.log_std = nn.Linear(hidden[-1], act_dim)
        self.log_std_min, self.log_std_max = float(log_std_min), float(log_std_max)

    def sample(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Normalized observations -> (tanh-squashed sampled action, its log-probability)."""
        h = self.features(x)
        mean = self.head(h)
        log_std = torch.tanh(self.log_std(h))
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (log_std + 1)
        std = log_std.exp()
        u = mean + std * torch.randn_like(mean)
        a = torch.tanh(u)
        logp = (-0.5 * ((u - mean) / std).pow(2) - log_std - 0.5 * torch.log(torch.tensor(2 * torch.pi))).sum(-1)
        logp = logp - (2 * (torch.log(torch.tensor(2.0)) - u - nn.functional.softplus(-2 * u))).sum(-1)  # tanh
        return a, logp


class TwinCritic(nn.Module):
    """Clipped double-Q: two LayerNorm MLPs Q(s, a); critic observations normalized by their own statistics."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: list[int], normalize: bool):
        super().__init__()
        self.obs_normalizer = EmpiricalNormalization(obs_dim) if normalize else nn.Identity()
        self.q = nn.ModuleList([mlp(obs_dim + act_dim, hidden, 1, layer_norm=True) for _ in range(2)])

    def forward(self, x: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """Normalized critic observations and actions -> (2, batch) Q-values."""
        xa = torch.cat([x, actions], -1)
        return torch.stack([q(xa).squeeze(-1) for q in self.q])
