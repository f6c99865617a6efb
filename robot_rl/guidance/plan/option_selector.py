"""Online correction of a plan: which affordance option to try at each subgoal, and when to re-plan.

A plan subgoal may list several options (``schema.Subgoal.options``). At every subgoal start the
trainer asks an :class:`OptionSelector` which one to try, runs it, and reports whether the
subgoal was achieved within its time budget. Two rules:

- ``"value_bonus"`` (LLM-TALE): ``argmax_i V_i + bonus * bonus_decay**t / sqrt(1 + chosen_i)``,
  ``V_i`` the critic's value with the goal slot set to option i (the caller computes it), ``t``
  the number of choices made so far at that (layout, subgoal). The count bonus tries every option
  early; later the critic decides, so a wrong option is abandoned only as fast as the critic
  learns that it fails. (LLM-TALE samples ``exp(T*clip(V - mean V)) * u_i`` with a decaying
  uncertainty ``u_i``; this is its deterministic, argmax form.) ``values=None`` counts as all-zero
  values: pure count-based round robin, i.e. LLM-TALE's warm-up before critic-based choice.
- ``"bandit"``: UCB1-Tuned (Auer, Cesa-Bianchi & Fischer 2002) on the measured success rate;
  ``values`` are ignored; options without a reported attempt first (fewest pending choices
  first, so a batch of worlds choosing before any report spreads over them). The variance-aware bonus
  ``bonus * sqrt(ln N / n_i * min(1/4, var_i + sqrt(2 ln N / n_i)))`` explores an option that
  always fails (variance 0) far less than plain UCB1, whose log-rate re-tries of a dead option
  are what a subgoal budget cannot afford. ``bonus_decay`` does not apply.

Both rules take a uniformly random option with probability ``epsilon``. Ties go to the lowest index.
Counts used by the exploration terms (``chosen_i``) grow at choose(); success rates only at
report(), so many worlds choosing at once are spread over the options by value_bonus's count
bonus (by the bandit only until every option has a report; use ``epsilon`` for more).

Re-planning: :meth:`OptionSelector.needs_replan` returns failure text for the planner when, at
some subgoal of the layout, *every* option has failed ``replan_after`` times in a row (a success
resets an option's streak, so a working but imperfect option never triggers a re-plan) and the
layout has been re-planned fewer than ``max_replans`` times. Early in training every option
fails because the policy cannot do anything yet: set ``replan_after`` above that phase's length.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass

RULES = ("value_bonus", "bandit")
PROB_TEMPERATURE = 0.1  # softmax temperature of probabilities(): preference scores live in ~[0, 1]


@dataclass
class OptionStats:
    tries: int = 0  # reported attempts (the success rate's sample size)
    successes: int = 0
    chosen: int = 0  # times choose() picked it; ahead of tries while attempts are running
    streak: int = 0  # consecutive failures since the last success (or since the last plan)

    @property
    def rate(self) -> float:
        return self.successes / self.tries if self.tries else 0.0


class OptionSelector:
    """Per (layout, subgoal index) choose an affordance option at each subgoal start.

    ``layout`` is whatever identifies a scene layout with its own plan (a layout seed or a world
    index); ``subgoal`` and options are 0-based indexes into that layout's current plan.
    """

    def __init__(
        self,
        rule: str = "value_bonus",
        bonus: float = 1.0,
        bonus_decay: float = 0.99,
        epsilon: float = 0.0,
        seed: int = 0,
        replan_after: int = 20,
        max_replans: int = 2,
        history_window: int = 1000,
        history_max: int = 500,
    ):
        if rule not in RULES:
            raise ValueError(f"unknown option rule '{rule}' (rules: {', '.join(RULES)})")
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"epsilon must be in [0, 1], got {epsilon}")
        if replan_after < 1 or max_replans < 0 or history_window < 1 or history_max < 1:
            raise ValueError("replan_after, history_window and history_max must be >= 1, max_replans >= 0")
        self.rule, self.bonus, self.bonus_decay, self.epsilon = rule, bonus, bonus_decay, epsilon
        self.replan_after, self.max_replans = replan_after, max_replans
        self.history_window, self.history_max = history_window, history_max
        self.rng = random.Random(seed)
        self.stats: dict[tuple[int, int], list[OptionStats]] = {}
        self.choices: dict[tuple[int, int], int] = {}  # t of the decay: choices made at that (layout, subgoal)
        self.last_values: dict[tuple[int, int], list[float]] = {}
        self.replans: dict[int, int] = {}
        self.labels: dict[int, list[str]] = {}  # layout -> per-subgoal description for failure text
        self.total_choices = 0
        # Bounded history: choice counts per window of `history_window` choices, at most `history_max` windows.
        self._closed: list[dict] = []
        self._window: dict = self._new_window()

    # -- choosing -----------------------------------------------------------------------------------
    def choose(self, layout: int, subgoal: int, n_options: int, values: Sequence[float] | None = None) -> int:
        if n_options < 1:
            raise ValueError(f"n_options must be >= 1, got {n_options}")
        if values is not None and len(values) != n_options:
            raise ValueError(f"{len(values)} values for {n_options} options")
        key = (int(layout), int(subgoal))
        stats = self._stats(key, n_options)
        if values is not None:
            self.last_values[key] = [float(v) for v in values]
        if self.epsilon > 0 and self.rng.random() < self.epsilon:
            choice = self.rng.randrange(n_options)
        else:
            scores = self._scores(key, stats, values)
            choice = max(range(n_options), key=lambda i: (scores[i], -i))
        self.choices[key] = self.choices.get(key, 0) + 1
        stats[choice].chosen += 1
        self._log(key, choice, n_options)
        return choice

    def _scores(self, key: tuple[int, int], stats: list[OptionStats], values: Sequence[float] | None) -> list[float]:
        if self.rule == "value_bonus":
            v = list(values) if values is not None else [0.0] * len(stats)
            b = self.bonus * self.bonus_decay ** self.choices.get(key, 0)
            return [v[i] + b / math.sqrt(1 + s.chosen) for i, s in enumerate(stats)]
        if any(s.tries == 0 for s in stats):
            return [-float(s.chosen) if s.tries == 0 else -math.inf for s in stats]
        log_n = math.log(sum(s.tries for s in stats))
        out = []
        for s in stats:
            mean = s.rate  # Bernoulli: the sample variance is mean * (1 - mean)
            var = mean * (1 - mean) + math.sqrt(2 * log_n / s.tries)
            out.append(mean + self.bonus * math.sqrt(log_n / s.tries * min(0.25, var)))
        return out

    def report(self, layout: int, subgoal: int, option: int, success: bool) -> None:
        """The subgoal was achieved (or failed) within its time budget with this option."""
        key = (int(layout), int(subgoal))
        stats = self.stats.get(key)
        if stats is None or not 0 <= option < len(stats):
            raise ValueError(f"report for layout {layout} subgoal {subgoal} option {option}: never chosen there")
        s = stats[option]
        s.tries += 1
        s.successes += int(bool(success))
        s.streak = 0 if success else s.streak + 1

    def success_estimates(self, layout: int, subgoal: int, n_options: int) -> list[float]:
        """Each option's Laplace-smoothed measured success rate (s + 1) / (n + 2); 0.5 for one never reported."""
        stats = self.stats.get((int(layout), int(subgoal)))
        if stats is None or len(stats) != n_options:
            return [0.5] * n_options
        return [(s.successes + 1) / (s.tries + 2) for s in stats]

    def probabilities(self, layout: int, subgoal: int, n_options: int) -> list[float]:
        """Current preference as a distribution, for logging and the dashboard (not used to choose).

        A softmax (temperature PROB_TEMPERATURE) of a preference score: the Laplace-smoothed
        success rate (s + 1) / (n + 2) for ``bandit``; for ``value_bonus`` the critic values last
        passed to choose() plus the current count bonus. Uniform before anything is known.
        """
        key = (int(layout), int(subgoal))
        stats = self.stats.get(key)
        if stats is None or len(stats) != n_options:
            return [1.0 / n_options] * n_options
        if self.rule == "bandit":
            scores = self.success_estimates(layout, subgoal, n_options)
        else:
            scores = self._scores(key, stats, self.last_values.get(key))
        top = max(scores)
        w = [math.exp((x - top) / PROB_TEMPERATURE) for x in scores]
        return [x / sum(w) for x in w]

    # -- re-planning -------------------------------------------------------------------------------
    def set_plan(self, layout: int, subgoal_labels: Sequence[str]) -> None:
        """Optional: describe the layout's current plan, one label per subgoal (used in failure text)."""
        self.labels[int(layout)] = [str(x) for x in subgoal_labels]

    def needs_replan(self, layout: int) -> str | None:
        layout = int(layout)
        if self.replans.get(layout, 0) >= self.max_replans:
            return None
        stuck = []
        for (lay, sg), stats in sorted(self.stats.items()):
            if lay == layout and all(s.streak >= self.replan_after for s in stats):
                stuck.append((sg, stats))
        if not stuck:
            return None
        labels = self.labels.get(layout, [])
        lines = []
        for sg, stats in stuck:
            name = f"subgoal {sg + 1}" + (f" ({labels[sg]})" if sg < len(labels) else "")
            tried = "; ".join(
                f"option {i + 1}: {s.successes}/{s.tries} achieved, the last {s.streak} failed"
                for i, s in enumerate(stats)
            )
            lines.append(f"{name} was never achieved recently with any option ({tried}).")
        return " ".join(lines)

    def replanned(self, layout: int) -> None:
        """The layout got a new plan: forget its option statistics and count the re-plan."""
        layout = int(layout)
        for key in [k for k in self.stats if k[0] == layout]:
            del self.stats[key]
            self.choices.pop(key, None)
            self.last_values.pop(key, None)
        self.labels.pop(layout, None)
        self.replans[layout] = self.replans.get(layout, 0) + 1

    # -- history -----------------------------------------------------------------------------------
    @property
    def history(self) -> list[dict]:
        """Choice counts per window: {"first": index of the window's first choice, "choices": n,
        "counts": {"layout:subgoal": [times each option was chosen]}}; closed windows plus the open one."""
        return [*self._closed, dict(self._window)] if self._window["choices"] else list(self._closed)

    def _new_window(self) -> dict:
        return {"first": getattr(self, "total_choices", 0), "choices": 0, "counts": {}}

    def _log(self, key: tuple[int, int], choice: int, n_options: int) -> None:
        counts = self._window["counts"].setdefault(f"{key[0]}:{key[1]}", [0] * n_options)
        if len(counts) < n_options:
            counts.extend([0] * (n_options - len(counts)))
        counts[choice] += 1
        self._window["choices"] += 1
        self.total_choices += 1
        if self._window["choices"] >= self.history_window:
            self._closed.append(self._window)
            del self._closed[: -self.history_max]
            self._window = self._new_window()

    # -- state --------------------------------------------------------------------------------------
    def _stats(self, key: tuple[int, int], n_options: int) -> list[OptionStats]:
        stats = self.stats.get(key)
        if stats is None or len(stats) != n_options:  # first time, or the plan changed shape
            stats = self.stats[key] = [OptionStats() for _ in range(n_options)]
            self.choices[key] = 0
        return stats

    def state_dict(self) -> dict:
        """JSON-able state (config, statistics, re-plan counts, history, RNG) for resumable runs."""
        version, internal, gauss = self.rng.getstate()
        return {
            "config": {
                "rule": self.rule,
                "bonus": self.bonus,
                "bonus_decay": self.bonus_decay,
                "epsilon": self.epsilon,
                "replan_after": self.replan_after,
                "max_replans": self.max_replans,
                "history_window": self.history_window,
                "history_max": self.history_max,
            },
            "stats": {f"{k[0]}:{k[1]}": [asdict(s) for s in v] for k, v in self.stats.items()},
            "choices": {f"{k[0]}:{k[1]}": n for k, n in self.choices.items()},
            "last_values": {f"{k[0]}:{k[1]}": v for k, v in self.last_values.items()},
            "replans": {str(k): n for k, n in self.replans.items()},
            "labels": {str(k): v for k, v in self.labels.items()},
            "total_choices": self.total_choices,
            "history": {"closed": self._closed, "window": self._window},
            "rng": [version, list(internal), gauss],
        }

    def load_state_dict(self, d: dict) -> None:
        # a fresh selector from the saved config: same validation as construction, then overwrite its state
        vars(self).update(vars(OptionSelector(**d["config"])))
        key = lambda s: tuple(int(x) for x in s.split(":"))  # noqa: E731
        self.stats = {key(k): [OptionStats(**s) for s in v] for k, v in d["stats"].items()}
        self.choices = {key(k): int(n) for k, n in d["choices"].items()}
        self.last_values = {key(k): [float(x) for x in v] for k, v in d["last_values"].items()}
        self.replans = {int(k): int(n) for k, n in d["replans"].items()}
        self.labels = {int(k): list(v) for k, v in d["labels"].items()}
        self.total_choices = int(d["total_choices"])
        self._closed = list(d["history"]["closed"])
        self._window = dict(d["history"]["window"])
        version, internal, gauss = d["rng"]
        self.rng.setstate((version, tuple(internal), gauss))
