"""Curves across seeds: grouping by configuration, the common x range, the mean and its t interval, CSV."""

from __future__ import annotations

import csv
import io
import math

import numpy as np
import pytest

from robot_rl.dashboard.curves import configuration, curves, curves_csv, group_runs, smooth

T95_2DOF = 4.303  # Student t 97.5 % quantile at 2 degrees of freedom (4.3027), as robot_rl.store.stats tabulates it


def flat(seed: int, lr: str, **extra: str) -> dict[str, str]:
    return {"seed": str(seed), "run_name": f"r{seed}", "algo.learning_rate": lr, "task.name": "crazyflie_hover",
            "eval.episodes": "1024", **extra}  # fmt: skip


def test_seed_name_and_eval_settings_do_not_split_a_configuration():
    assert configuration(flat(0, "1e-3")) == configuration(flat(1, "1e-3", **{"eval.episodes": "32"}))
    assert configuration(flat(0, "1e-3")) != configuration(flat(0, "3e-4"))
    groups = group_runs({"a": flat(0, "1e-3"), "b": flat(1, "3e-4"), "c": flat(2, "1e-3")})
    assert groups == [("algo.learning_rate=1e-3", ["a", "c"]), ("algo.learning_rate=3e-4", ["b"])]
    assert group_runs({"a": flat(0, "1e-3"), "b": flat(1, "1e-3")}) == [("all runs", ["a", "b"])]


def scalars(values: list[float], steps_per_it: int, first_it: int = 0) -> dict[str, list[list[float]]]:
    its = range(first_it, first_it + len(values))
    return {
        "Train/mean_reward": [[i, v] for i, v in zip(its, values, strict=True)],
        "Perf/total_env_steps": [[i, (i + 1) * steps_per_it] for i in its],
    }


def test_mean_and_t_interval_across_seeds_over_the_common_range():
    configs = {n: flat(s, "1e-3") for s, n in enumerate("abc")}
    data = {
        "a": scalars([0.0, 1.0, 2.0, 3.0], 100),
        "b": scalars([1.0, 2.0, 3.0, 4.0, 5.0], 100),  # longer: the curve stops where the shortest seed does
        "c": scalars([5.0, 6.0, 7.0], 100, first_it=1),  # starts later: the curve starts there
    }
    (g,) = curves(configs, data, "Train/mean_reward", "steps", 0.0)
    pts = np.array(g.points)
    assert g.n_seeds == 3 and pts[0, 0] == 200 and pts[-1, 0] == 400
    at_400 = np.array([3.0, 4.0, 7.0])  # each seed's value at 400 env steps
    half = T95_2DOF * at_400.std(ddof=1) / math.sqrt(3)
    assert pts[-1, 1:] == pytest.approx([at_400.mean(), at_400.mean() - half, at_400.mean() + half])
    # interpolated between logged iterations: halfway from 200 to 300 steps
    i = int(np.argmin(np.abs(pts[:, 0] - 250)))
    x = pts[i, 0]
    expect = np.mean(
        [np.interp(x, [200, 300], [1, 2]), np.interp(x, [200, 300], [2, 3]), np.interp(x, [200, 300], [5, 6])]
    )
    assert pts[i, 1] == pytest.approx(expect)


def test_rates_are_clipped_to_0_1_and_one_seed_has_no_band():
    data = {n: {"Train/success_rate": [[0, v]], "Perf/total_env_steps": [[0, 10]]} for n, v in [("a", 0.0), ("b", 1.0)]}
    (g,) = curves({"a": flat(0, "x"), "b": flat(1, "x")}, data, "Train/success_rate", "steps", 0.0)
    assert g.points == [[10.0, 0.5, 0.0, 1.0]]
    (one,) = curves({"a": flat(0, "x")}, data, "Train/success_rate", "iteration", 0.0)
    assert one.points == [[1.0, 0.0, 0.0, 0.0]]


def test_seeds_that_never_overlap_give_an_empty_curve():
    data = {"a": scalars([1.0, 2.0], 10), "b": scalars([1.0, 2.0], 10, first_it=5)}
    (g,) = curves({"a": flat(0, "x"), "b": flat(1, "x")}, data, "Train/mean_reward", "steps", 0.0)
    assert g.points == [] and g.n_with_data == 2
    (g,) = curves({"a": flat(0, "x"), "b": flat(1, "x")}, {"a": scalars([1.0], 10)}, "Train/mean_reward", "steps", 0.0)
    assert g.n_seeds == 2 and g.n_with_data == 1 and g.points == [[10.0, 1.0, 1.0, 1.0]]


def test_smoothing_is_debiased_exponential_averaging():
    v = np.array([10.0, 0.0, 0.0])
    out = smooth(v, 0.5)
    assert out[0] == 10.0  # not pulled towards 0
    assert out[1] == pytest.approx((0.5 * 0.5 * 10) / (0.5 * 0.5 + 0.5))
    assert np.array_equal(smooth(v, 0.0), v)


def test_csv_has_one_row_per_group_and_point():
    configs = {"a": flat(0, "1"), "b": flat(1, "2")}
    data = {"a": scalars([1.0, 2.0], 10), "b": scalars([3.0, 4.0], 10)}
    groups = curves(configs, data, "Train/mean_reward", "steps", 0.0)
    rows = list(csv.reader(io.StringIO(curves_csv(groups, "Train/mean_reward", "steps"))))
    assert rows[0] == [
        "group",
        "n_seeds",
        "n_with_data",
        "runs",
        "x (env steps)",
        "mean Train/mean_reward",
        "ci95_lo",
        "ci95_hi",
    ]
    assert [r[0] for r in rows[1:]] == [
        "algo.learning_rate=1",
        "algo.learning_rate=1",
        "algo.learning_rate=2",
        "algo.learning_rate=2",
    ]
    assert [float(r[4]) for r in rows[1:3]] == [10.0, 20.0] and float(rows[-1][5]) == 4.0
