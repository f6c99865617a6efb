import pytest

from robot_rl.evaluation.stats import wilson_interval


def test_wilson_interval_known_values():
    lo, hi = wilson_interval(1023, 1024)
    assert lo == pytest.approx(0.99452, abs=1e-4) and hi == pytest.approx(0.99983, abs=1e-4)
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-3)
    lo, hi = wilson_interval(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-3) and hi == pytest.approx(0.7634, abs=1e-3)
    assert wilson_interval(0, 0) == (0.0, 1.0)
