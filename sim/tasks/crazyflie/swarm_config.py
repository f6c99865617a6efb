"""The swarm task's configuration: scene numbering, collision distances, observation noise and reward weights."""

from dataclasses import dataclass

from robot_conventions.observation_ops import FAR_NEIGHBOUR_M

HELD_OUT_BASE = 1_000_000
NEIGHBOUR_HIT = 0.12  # m centre to centre: the collision boxes touch
OBSTACLE_HIT = 0.06  # m centre to obstacle surface
OBS_NOISE_STD = {"position": 0.005, "velocity": 0.02, "rotation": 0.005, "angular_velocity": 0.05}
FAR = FAR_NEIGHBOUR_M  # padding for missing neighbours (fewer drones than k + 1), metres


@dataclass
class SwarmRewardWeights:
    setpoint: float = 1.0  # exp(-|p - p_sp| / 0.3): track the planner's moving setpoint
    goal: float = 0.5  # exp(-|p - goal| / 0.5): be at the goal when the plan has ended
    # speed toward the goal (m/s), the rate at which -|p - goal| grows: potential-based shaping, so it leaves the
    # optimal policy unchanged, and unlike the two exp terms it still pulls a drone that has fallen far behind
    # its setpoint (off by default: the published tables were trained without it)
    goal_progress: float = 0.0
    velocity_tracking: float = -0.05
    effort: float = -0.05  # LEARN: 0.05 |a|
    angular_velocity: float = -0.005
    obstacle_collision: float = -5.0
    obstacle_proximity: float = -1.0  # linear from 0.5 m to 0.05 m surface distance (LEARN)
    neighbour_collision: float = -5.0
    neighbour_proximity: float = -1.0  # linear from 4 to 2 arm lengths... scaled to hit distance
    crash: float = -10.0
    # stage 1's guide STRENGTH (>= 0; 0 = stage 2): the term is -safety_guide |a - a_cbf|, a_cbf the CBF-filtered
    # planner command in policy units (unlike the signed weights above, a positive value penalises)
    safety_guide: float = 0.0
