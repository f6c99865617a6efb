"""The sim-to-real tests' "real" Crazyflie: its hidden parameters are in sim2real_robot.py, its recorded flight is
the session fixture perturbed_flight (tests/conftest.py, shared with the dashboard's sim-vs-real tests)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # --import-mode=importlib: the tests import it by name
