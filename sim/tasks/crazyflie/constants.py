"""The Crazyflie 2.1 (assets/crazyflie/crazyflie.xml): the model and its body facts."""

from pathlib import Path

MODEL_PATH = Path(__file__).resolve().parents[3] / "assets" / "crazyflie" / "crazyflie.xml"
REST_Z = 0.0125  # body origin height when the collision box rests on the floor
DRONE_RADIUS = 0.056  # propeller envelope half width (crazyflie.xml collision box)
