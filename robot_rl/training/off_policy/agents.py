"""The TD3 and SAC updates on n-step batches (replay.ReplayBuffer.sample), CleanRL-style.

Both: clipped double-Q targets `returns + discount * min(Q1', Q2')(s', a')` from target critics kept by
Polyak averaging, the actor (and targets) updated every `policy_delay` critic updates. TD3 (Fujimoto et
al. 2018): deterministic actor, target policy smoothing (clipped Gaussian noise on a'), Gaussian
exploration noise. SAC (Haarnoja et al. 2018): tanh-Gaussian actor, entropy bonus with a learned
temperature alpha toward target_entropy. Observations arrive normalized (the trainer's job).
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod

import torch
from torch import nn

from robot_rl.training.distributed import average_gradients
from robot_rl.training.off_policy.config import OffPolicyConfig
from robot_rl.training.off_policy.networks import Actor, GaussianActor, TwinCritic


def polyak(target: nn.Module, online: nn.Module, tau: float) -> None:
    with torch.no_grad():
        for t, p in zip(target.parameters(), online.parameters(), strict=True):
            t.lerp_(p, tau)


class Agent(nn.Module, ABC):
    """Networks, target networks and optimizers of one learner; update(batch) -> losses (tensors)."""

    def __init__(self, cfg: OffPolicyConfig, obs_dim: int, critic_obs_dim: int, act_dim: int):
        super().__init__()
        self.cfg = cfg
        self.act_dim = act_dim
        self.actor = self._make_actor(obs_dim, act_dim)
        self.critic = TwinCritic(critic_obs_dim, act_dim, list(cfg.critic_hidden_dims), cfg.obs_normalization)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.actor_opt = torch.optim.AdamW(
            self.actor.parameters(), lr=cfg.actor_learning_rate, weight_decay=cfg.weight_decay
        )
        self.critic_opt = torch.optim.AdamW(
            self.critic.parameters(), lr=cfg.critic_learning_rate, weight_decay=cfg.weight_decay
        )
        self.updates = 0  # critic updates done (the policy delay counts them)

    @abstractmethod
    def _make_actor(self, obs_dim: int, act_dim: int) -> Actor:
        """The actor network of this learner."""

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        """Every optimizer by the name its state has in a checkpoint."""
        return {"actor": self.actor_opt, "critic": self.critic_opt}

    @abstractmethod
    def explore(self, x: torch.Tensor) -> torch.Tensor:
        """Normalized policy observations -> the actions to collect with."""

    @abstractmethod
    def next_action(self, x_next: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The target's action at s' and the entropy term subtracted from its Q (0 for TD3)."""

    @abstractmethod
    def actor_loss(self, b: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The actor's (and SAC's temperature's) losses on a batch (x, xc, actions, prior)."""

    def update(self, b: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One critic update (and every policy_delay-th an actor and target update) on a normalized batch:
        x, xc (critic), actions, returns, discount, x_next, xc_next, and prior (bool: rows of prior data)."""
        cfg = self.cfg
        with torch.no_grad():
            a_next, entropy_term = self.next_action(b["x_next"])
            q_next = self.critic_target(b["xc_next"], a_next).min(0).values - entropy_term
            target = b["returns"] + b["discount"] * q_next
        q = self.critic(b["xc"], b["actions"])
        critic_loss = (q - target).pow(2).mean(1).sum()
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        average_gradients(self.critic.parameters())  # over torchrun's ranks; nothing in one process
        self.critic_opt.step()
        self.updates += 1
        losses = {"critic": critic_loss.detach(), "q_mean": q.detach().mean()}
        if self.updates % cfg.policy_delay == 0:
            losses.update(self.actor_loss(b))
            polyak(self.critic_target, self.critic, cfg.tau)
            self.after_actor_update()
        return losses

    def after_actor_update(self) -> None:
        pass


class TD3Agent(Agent):
    def __init__(self, cfg: OffPolicyConfig, obs_dim: int, critic_obs_dim: int, act_dim: int):
        super().__init__(cfg, obs_dim, critic_obs_dim, act_dim)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)

    def _make_actor(self, obs_dim: int, act_dim: int) -> Actor:
        c = self.cfg
        return Actor(obs_dim, act_dim, list(c.actor_hidden_dims), c.obs_normalization, c.init_action_scale)

    def explore(self, x: torch.Tensor) -> torch.Tensor:
        a = self.actor.mlp(x)
        return (a + self.cfg.exploration_noise * torch.randn_like(a)).clamp(-1.0, 1.0)

    def next_action(self, x_next: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a = self.actor_target.mlp(x_next)
        noise = (self.cfg.policy_noise * torch.randn_like(a)).clamp(-self.cfg.noise_clip, self.cfg.noise_clip)
        return (a + noise).clamp(-1.0, 1.0), torch.zeros((), device=a.device)

    def actor_loss(self, b: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        a = self.actor.mlp(b["x"])
        q = self.critic(b["xc"], a)[0]
        out = {}
        if self.cfg.bc_weight > 0 and bool(b["prior"].any()):
            # TD3+BC: Q scaled by its own magnitude, so bc_weight means the same whatever the reward's scale
            prior = b["prior"]
            bc = (a[prior] - b["actions"][prior]).pow(2).mean()  # per action element, as TD3+BC writes it
            loss = -q.mean() / q.abs().mean().detach().clamp(min=1e-6) + self.cfg.bc_weight * bc
            out["bc"] = bc.detach()
        else:
            loss = -q.mean()
        self.actor_opt.zero_grad(set_to_none=True)
        loss.backward()
        average_gradients(self.actor.parameters())
        self.actor_opt.step()
        return {"actor": loss.detach(), **out}

    def after_actor_update(self) -> None:
        polyak(self.actor_target, self.actor, self.cfg.tau)


class SACAgent(Agent):
    def __init__(self, cfg: OffPolicyConfig, obs_dim: int, critic_obs_dim: int, act_dim: int):
        super().__init__(cfg, obs_dim, critic_obs_dim, act_dim)
        self.log_alpha = nn.Parameter(torch.tensor(float(cfg.init_alpha)).log())
        self.alpha_opt = torch.optim.Adam([self.log_alpha], lr=cfg.alpha_learning_rate)
        self.target_entropy = float(-act_dim if cfg.target_entropy is None else cfg.target_entropy)

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {**super().optimizers(), "alpha": self.alpha_opt}

    def _make_actor(self, obs_dim: int, act_dim: int) -> Actor:
        c = self.cfg
        hidden = list(c.actor_hidden_dims)
        return GaussianActor(
            obs_dim, act_dim, hidden, c.obs_normalization, c.init_action_scale, c.log_std_min, c.log_std_max
        )

    @property
    def alpha(self) -> torch.Tensor:
        return self.log_alpha.detach().exp()

    def explore(self, x: torch.Tensor) -> torch.Tensor:
        return self.actor.sample(x)[0]

    def next_action(self, x_next: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a, logp = self.actor.sample(x_next)
        return a, self.alpha * logp

    def actor_loss(self, b: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        a, logp = self.actor.sample(b["x"])
        q = self.critic(b["xc"], a).min(0).values
        loss = (self.alpha * logp - q).mean()
        self.actor_opt.zero_grad(set_to_none=True)
        loss.backward()
        average_gradients(self.actor.parameters())
        self.actor_opt.step()
        out = {"actor": loss.detach(), "entropy": -logp.detach().mean()}
        if self.cfg.learn_alpha:
            alpha_loss = -(self.log_alpha.exp() * (logp.detach() + self.target_entropy)).mean()
            self.alpha_opt.zero_grad(set_to_none=True)
            alpha_loss.backward()
            average_gradients([self.log_alpha])
            self.alpha_opt.step()
            out["alpha"] = alpha_loss.detach()
        return out


def make_agent(cfg: OffPolicyConfig, obs_dim: int, critic_obs_dim: int, act_dim: int) -> Agent:
    return (TD3Agent if cfg.name == "td3" else SACAgent)(cfg, obs_dim, critic_obs_dim, act_dim)
