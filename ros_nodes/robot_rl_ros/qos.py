"""The QoS profiles every node uses; one place so publishers and subscribers always match."""

from __future__ import annotations

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

# Sensor streams (odometry, joint states): the newest sample is the only useful one, and a
# retransmitted old sample is worse than none. Best effort also matches reliable publishers
# such as Crazyswarm2's server.
SENSOR = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=ReliabilityPolicy.BEST_EFFORT,
    durability=DurabilityPolicy.VOLATILE,
)

# Commands (policy actions, robot setpoints): delivered, newest only. Compatible with
# Crazyswarm2's SystemDefaultsQoS subscription on cmd_vel_legacy.
COMMAND = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
)

# Emergency stop and mode: latched, so a node that starts (or restarts) late still sees it.
LATCHED = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)

# Diagnostics: reliable, with a queue deep enough that a reader stalled for a few seconds loses no
# intervention event. Each event is reported once; lock-step simulation runs faster than real time and
# several nodes share the topic; 20 samples (4 s of one node at 5 Hz) are too few on a loaded machine.
DIAGNOSTICS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=200,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
)

# /clock for lock-step simulation (rclpy's TimeSource subscribes best effort, depth 1).
CLOCK = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
)

# Records a reader must not miss (observation/command pairs for replay checks): reliable, a deep queue.
RECORD = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1000,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
)
