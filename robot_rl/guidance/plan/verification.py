"""DECKARD-style verification of a plan's subgoal graph from experience.

DECKARD treats the language model's plan as a *hypothesis*: a node becomes verified when the
agent actually achieves it, and nodes that never work are demoted. Here the graph is the plan's
chain of subgoals 0 -> 1 -> ... -> n-1; every attempt of a subgoal is recorded with whether it
was achieved within its budget. Status per subgoal:

- ``verified``: achieved at least ``threshold`` times;
- ``refuted``: not verified, at least ``4 * threshold`` attempts and a success rate below
  ``refute_rate`` (default 2 %; with no success at all this is DECKARD's "never works");
- ``unverified``: not enough evidence either way.

Edges i -> i+1 carry the conditional rate ``achieved[i+1] / achieved[i]``: how often reaching
subgoal i led to achieving i+1 (subgoals run in order, so i+1 is only attempted after i). A
low edge rate locates the step of the plan that breaks. Also reported: DECKARD's success EMA
(``0.9 * old + 0.1 * new``) per subgoal, which follows a policy that is still learning.
"""

from __future__ import annotations

import json
from pathlib import Path

from robot_rl.guidance.plan.schema import Plan

STATUSES = ("verified", "refuted", "unverified")


class PlanVerifier:
    """Counts per subgoal (and per option, when given) for one plan; one verifier per layout or plan."""

    def __init__(self, plan: Plan, threshold: int = 5, refute_rate: float = 0.02, ema_weight: float = 0.1):
        if threshold < 1:
            raise ValueError(f"threshold must be >= 1, got {threshold}")
        self.plan, self.threshold, self.refute_rate, self.ema_weight = plan, threshold, refute_rate, ema_weight
        n = len(plan.subgoals)
        self.attempts = [0] * n
        self.achieved = [0] * n
        self.ema = [0.0] * n
        self.option_counts = [[[0, 0] for _ in sg.options] for sg in plan.subgoals]  # [attempts, achieved]

    def record(self, subgoal: int, achieved: bool, option: int | None = None) -> None:
        """One attempt of ``subgoal`` (0-based), optionally with the option that was tried."""
        if not 0 <= subgoal < len(self.attempts):
            raise ValueError(f"subgoal {subgoal} out of range (plan has {len(self.attempts)})")
        ok = int(bool(achieved))
        self.attempts[subgoal] += 1
        self.achieved[subgoal] += ok
        w = self.ema_weight
        self.ema[subgoal] = (1 - w) * self.ema[subgoal] + w * ok
        if option is not None:
            counts = self.option_counts[subgoal]
            if not 0 <= option < len(counts):
                raise ValueError(f"option {option} out of range (subgoal {subgoal} has {len(counts)})")
            counts[option][0] += 1
            counts[option][1] += ok

    def status(self, subgoal: int) -> str:
        attempts, achieved = self.attempts[subgoal], self.achieved[subgoal]
        if achieved >= self.threshold:
            return "verified"
        if attempts >= 4 * self.threshold and achieved / attempts < self.refute_rate:
            return "refuted"
        return "unverified"

    def summary(self) -> dict:
        subgoals = []
        for i, sg in enumerate(self.plan.subgoals):
            n, k = self.attempts[i], self.achieved[i]
            subgoals.append(
                {
                    "index": i,
                    "skill": sg.skill,
                    "objects": [o.object for o in sg.options],
                    "attempts": n,
                    "achieved": k,
                    "rate": k / n if n else None,
                    "ema": self.ema[i],
                    "status": self.status(i),
                    "options": [
                        {**o.model_dump(), "attempts": c[0], "achieved": c[1]}
                        for o, c in zip(sg.options, self.option_counts[i], strict=True)
                    ],
                }
            )
        edges = [
            {
                "from": i,
                "to": i + 1,
                "given": self.achieved[i],
                "achieved": self.achieved[i + 1],
                "rate": min(1.0, self.achieved[i + 1] / self.achieved[i]) if self.achieved[i] else None,
            }
            for i in range(len(subgoals) - 1)
        ]
        statuses = [s["status"] for s in subgoals]
        return {
            "threshold": self.threshold,
            "refute_rate": self.refute_rate,
            "subgoals": subgoals,
            "edges": edges,
            "plan_verified": bool(statuses) and all(s == "verified" for s in statuses),
            "first_refuted": statuses.index("refuted") if "refuted" in statuses else None,
        }

    def counts(self) -> dict:
        """The counts alone, as a checkpoint carries them (``load_counts`` restores them)."""
        return {
            "attempts": self.attempts,
            "achieved": self.achieved,
            "ema": self.ema,
            "option_counts": self.option_counts,
        }

    def load_counts(self, saved: dict) -> None:
        self.attempts, self.achieved, self.ema = list(saved["attempts"]), list(saved["achieved"]), list(saved["ema"])
        self.option_counts = [[list(c) for c in sg] for sg in saved["option_counts"]]

    def save(self, path: str | Path) -> Path:
        """The summary plus the plan as JSON (``load`` restores the counts)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {"plan": self.plan.model_dump(mode="json"), "ema_weight": self.ema_weight, **self.summary()}
        path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> PlanVerifier:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        v = cls(Plan.model_validate(data["plan"]), data["threshold"], data["refute_rate"], data["ema_weight"])
        for i, s in enumerate(data["subgoals"]):
            v.attempts[i], v.achieved[i], v.ema[i] = s["attempts"], s["achieved"], s["ema"]
            v.option_counts[i] = [[o["attempts"], o["achieved"]] for o in s["options"]]
        return v
