"""One commander: the safety node is the only publisher of robot commands, checked, not assumed.

ROS 2 lets any process publish on any topic, and rclpy tells a subscriber nothing about who sent a
message but the DDS writer's sequence number. So the check has two halves:

- `extra_publishers(node, topic, ...)`: a graph query, run by the safety node at arming and on its
  timer; any publisher of its command topic but itself is a fault (fallback, /diagnostics).
- `CommandGate`, on the robot side where the robot side is ours (the Crazyflie bridge, the sim
  bridges): a command stream is accepted only once the graph shows exactly one publisher of the topic
  and it is the expected commander; from then on only that writer's stream (sequence numbers that
  continue it) gets through. A second writer's messages carry their own sequence numbers, so they are
  refused from the first one, even before discovery has put their publisher into the graph.

This is defence in depth, not authentication: a DDS participant can forge sequence numbers. Real
deployments enable SROS2 (DDS security: authenticated participants, signed and access-controlled
topics) so that only the safety node's identity may publish commands; see docs/safety.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from rclpy.node import Node


def _publishers(node: Node, topic: str) -> list[tuple[str, tuple[int, ...]]]:
    return [
        (f"{i.node_namespace.rstrip('/')}/{i.node_name}", tuple(i.endpoint_gid))
        for i in node.get_publishers_info_by_topic(topic)
    ]


def extra_publishers(node: Node, topic: str) -> list[str]:
    """Publishers of `topic` besides this node's one publisher of it (one of this node's own name
    counts: two endpoints of the same node name are one too many as well)."""
    names = [n for n, _ in _publishers(node, topic)]
    mine = f"{node.get_namespace().rstrip('/')}/{node.get_name()}"
    if mine in names:
        names.remove(mine)
    return names


@dataclass
class CommandGate:
    """Accepts the messages of one writer on a command topic: the expected commander's.

    `commander`: the fully qualified node name allowed to publish (e.g. '/cf1/safety').
    `max_seq_gap`: how far a writer's sequence number may run ahead between two accepted messages
    without a look at the graph (a reliable, depth-1 stream skips the few a slow reader never took).
    """

    topic: str
    commander: str
    max_seq_gap: int = 50
    last_seq: int | None = None
    writer: tuple[int, ...] | None = None  # the locked writer's endpoint gid
    accepted: int = 0
    refused: int = 0
    last_reason: str = ""

    def others(self, node: Node) -> list[str]:
        """Publishers of the topic that are not the commander (a second endpoint of its name included)."""
        names = [n for n, _ in _publishers(node, self.topic)]
        if self.commander in names:
            names.remove(self.commander)
        return names

    def admit(self, node: Node, message_info: dict) -> bool:
        """Whether this message is from the commander's stream; counts and remembers why not."""
        seq = message_info.get("publication_sequence_number")
        if seq is not None and self.last_seq is not None and self.last_seq < seq <= self.last_seq + self.max_seq_gap:
            return self._accept(seq)
        pubs = _publishers(node, self.topic)
        if [n for n, _ in pubs] != [self.commander]:
            others = [n for n, _ in pubs if n != self.commander] or [f"a second {self.commander}"]
            return self._refuse(f"{self.topic}: refused, published by {', '.join(others)} besides {self.commander}")
        gid = pubs[0][1]
        if self.writer is not None and gid == self.writer and seq is not None and seq <= self.last_seq:
            # The commander's own writer never goes back: this is another writer that discovery has not
            # put into the graph yet.
            return self._refuse(f"{self.topic}: refused, a writer unknown to the graph (sequence {seq})")
        self.writer = gid  # first lock, the commander restarted (new writer), or a slow reader skipped ahead
        return self._accept(seq)

    def _accept(self, seq: int | None) -> bool:
        self.last_seq = seq
        self.accepted += 1
        return True

    def _refuse(self, reason: str) -> bool:
        self.refused += 1
        self.last_reason = reason
        return False


def commander_name(node: Node, topic: str, commander: str) -> str:
    """The commander's fully qualified name: absolute as given, else beside the topic (an absolute topic
    '/cf2/cmd_motors' -> '/cf2/<commander>') or in the node's namespace (a relative topic)."""
    if commander.startswith("/"):
        return commander
    ns = topic.rsplit("/", 1)[0] if topic.startswith("/") else node.get_namespace().rstrip("/")
    return f"{ns}/{commander}"


def gated_subscription(node: Node, msg_type, topic: str, callback, commander: str, qos_profile) -> CommandGate | None:
    """Subscribe `callback(msg, published_ns)` to a command topic behind a CommandGate for `commander` ('' : no
    gate, for a bench set-up where a test or an operator commands the robot directly); published_ns is when the
    publisher sent it (its wall clock, ns; None where the middleware does not say). Refused messages are logged
    (throttled) and counted on the gate."""
    gate = CommandGate(node.resolve_topic_name(topic), commander_name(node, topic, commander)) if commander else None

    def cb(msg, info) -> None:
        if gate is None or gate.admit(node, info):
            callback(msg, info.get("source_timestamp"))
        else:
            node.get_logger().error(gate.last_reason, throttle_duration_sec=1.0)

    node.create_subscription(msg_type, topic, cb, qos_profile)
    return gate
