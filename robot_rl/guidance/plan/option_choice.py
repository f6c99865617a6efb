"""Which option each world tries at the start of a subgoal: the OptionSelector's choice for the world's layout
and subgoal, fed for the value_bonus rule with the critic's value of every option (LLM-TALE)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from robot_rl.guidance.plan.option_selector import OptionSelector
from robot_rl.guidance.plan.schema import MAX_OPTIONS
from robot_rl.guidance.plan.subgoals import PlanTables


def choose_options(
    selector: OptionSelector,
    tables: PlanTables,
    layout_id: torch.Tensor,
    sub: torch.Tensor,
    opt: torch.Tensor,
    ids: torch.Tensor,
    values: torch.Tensor | None = None,
) -> None:
    """Write into opt the option each world in ids tries at its subgoal sub (worlds whose plan is done keep
    theirs). values: (len(ids), MAX_OPTIONS) critic values of the options, for the value_bonus rule."""
    for k, i in enumerate(ids.tolist()):
        layout, s = int(layout_id[i]), int(sub[i])
        if s < int(tables.n_sub[layout]):
            n = int(tables.n_opt[layout, s])
            opt[i] = selector.choose(layout, s, n, None if values is None else values[k, :n].tolist())


@torch.no_grad()
def option_values(
    ids: torch.Tensor, n_opt: torch.Tensor, opt: torch.Tensor, value: Callable[[], torch.Tensor]
) -> torch.Tensor:
    """The critic's value of each option's goal, i.e. of the observation each world in ids would see with that
    option chosen: (len(ids), MAX_OPTIONS), -inf beyond a subgoal's n_opt options. value() observes with the
    options now in opt (set here in turn, then restored) and returns every world's value (n, 1)."""
    keep = opt.clone()
    out = torch.full((len(ids), MAX_OPTIONS), float("-inf"))
    for o in range(int(n_opt.max())):
        opt[ids] = torch.minimum(torch.full_like(ids, o), n_opt - 1)
        out[:, o] = value()[ids].reshape(-1).float()
    opt.copy_(keep)
    return out
