"""The Go1-like quadruped (assets/quadruped/go1_like.xml): asset paths, joints, limits and body facts."""

from pathlib import Path

ASSET_DIR = Path(__file__).resolve().parents[3] / "assets" / "quadruped"
ROBOT_PATH = ASSET_DIR / "go1_like.xml"
FLAT_SCENE = ASSET_DIR / "scene.xml"

LEGS = ("FR", "FL", "RR", "RL")  # Unitree motor order
JOINT_NAMES = [f"{leg}_{part}" for leg in LEGS for part in ("hip", "thigh", "calf")]
# legged_gym's A1 defaults (used for Go1-class robots): hips splayed 0.1 rad outwards, rear thighs further back
DEFAULT_JOINT_POS = [-0.1, 0.8, -1.5, 0.1, 0.8, -1.5, -0.1, 1.0, -1.5, 0.1, 1.0, -1.5]
JOINT_LOW = [-0.863, -0.686, -2.818] * 4  # Go1 URDF limits (rad)
JOINT_HIGH = [0.863, 4.501, -0.888] * 4
TORQUE_LIMIT = [23.7, 23.7, 35.55] * 4  # N m
SPAWN_HEIGHT = 0.34  # trunk origin above the ground at reset: feet just clear of it in the home pose
TOTAL_MASS = 12.864  # kg, as written in go1_like.xml
TRUNK_MASS = 5.204  # kg, its trunk body as written there
THIGH_LENGTH = CALF_LENGTH = 0.213  # m
FOOT_RADIUS = 0.02

# contact sensor rows in go1_like.xml
FEET = slice(0, 4)
BODY_CONTACTS = slice(4, 13)  # trunk, hips, thighs: ground contact ends the episode
CALVES = slice(13, 17)  # collision penalty
