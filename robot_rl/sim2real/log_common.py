"""What every robot's log reader shares: reading an MCAP's messages, ordering stamps (duplicates, late delivery,
clock resets), finding drops, placing unstamped commands between states by publish time, and the one-line
LogError. flight_log (Crazyflie) and arm_log (joint_states + forward controller commands) build on it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

REORDER_TOLERANCE_S = 0.05  # a stamp this far behind the newest is late delivery; further back, a clock reset
GAP_FACTOR = 1.5  # a state interval this many median periods long lost messages


class LogError(ValueError):
    """A log that cannot be read as this robot's; the message names the file and the topic or time."""


@dataclass
class LogReport:
    """What was repaired or noticed while aligning, for the replay and sysid reports."""

    state_topic: str
    command_topic: str
    state_messages: int
    command_messages: int
    duplicates: int = 0
    reordered: int = 0
    gaps: list[tuple[float, float]] = field(default_factory=list)  # (start s, length s) of each drop
    clock_offset_s: float = 0.0  # median(publish time - stamp) of the state messages
    clock_jitter_s: float = 0.0  # their spread (median absolute deviation)
    period_s: float = 0.01
    superseded: int = 0  # commands replaced by a newer one before the next state (used for no step)

    @classmethod
    def of(
        cls,
        state_topic: str,
        command_topic: str,
        counts: tuple[int, int],
        order: tuple[int, int],
        gaps,
        offset_s: np.ndarray,
        period_s: float,
        superseded: int = 0,
    ) -> LogReport:
        """From the alignment's findings: message counts (state, command), (duplicates, reordered), the gaps and
        each state message's publish time minus its stamp."""
        median = float(np.median(offset_s))
        return cls(
            state_topic=state_topic,
            command_topic=command_topic,
            state_messages=counts[0],
            command_messages=counts[1],
            duplicates=order[0],
            reordered=order[1],
            gaps=gaps,
            clock_offset_s=median,
            clock_jitter_s=float(np.median(np.abs(offset_s - median))),
            period_s=period_s,
            superseded=superseded,
        )

    def lines(self) -> list[str]:
        dropped = sum(max(0, round(length / self.period_s) - 1) for _, length in self.gaps)
        return [
            f"state {self.state_topic}: {self.state_messages} messages at {1 / self.period_s:.0f} Hz; "
            f"commands {self.command_topic}: {self.command_messages} ({self.superseded} superseded within a state "
            "step)",
            f"repaired: {self.duplicates} duplicate stamps dropped, {self.reordered} out-of-order messages sorted",
            f"gaps: {len(self.gaps)} ({dropped} state messages missing"
            + (f", longest {max(g for _, g in self.gaps) * 1000:.0f} ms)" if self.gaps else ")"),
            f"recorder clock - robot clock: {self.clock_offset_s:+.3f} s (jitter {self.clock_jitter_s * 1000:.1f} ms)",
        ]


def read_messages(path: Path, wanted: Callable[[str], bool]) -> tuple[dict[str, list], set[str]]:
    """topic -> [(publish_ns, log_ns, message)] for the topics wanted(topic) keeps, and all topic names; LogError
    for a missing, truncated or damaged file."""
    from mcap.exceptions import McapError
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    if not path.is_file():
        raise LogError(f"{path}: no such log file")
    out: dict[str, list] = {}
    topics: set[str] = set()
    count = 0
    try:
        with open(path, "rb") as f:
            reader = make_reader(f, decoder_factories=[DecoderFactory()])
            for _, channel, message, decoded in reader.iter_decoded_messages(
                topics=None, log_time_order=False, reverse=False
            ):
                topics.add(channel.topic)
                if wanted(channel.topic):
                    out.setdefault(channel.topic, []).append((message.publish_time, message.log_time, decoded))
                count += 1
    except (McapError, EOFError, ValueError, KeyError, OSError) as e:
        where = f" after {count} messages" if count else ""
        raise LogError(f"{path}: truncated or damaged MCAP{where} ({type(e).__name__}: {e})") from None
    return out, topics


def stamp_s(msg) -> float:
    s = msg.header.stamp
    return s.sec + s.nanosec * 1e-9


def publish_s(rows: list) -> np.ndarray:
    """Publish times (s) of (publish_ns, log_ns, message) rows; the log time where a recorder kept none."""
    return np.array([(p or lg) * 1e-9 for p, lg, _ in rows], dtype=np.float64)


def joint_state_rows(
    topic: str, rows: list, path: Path, names: list[str], required: int, fill: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]:
    """sensor_msgs/JointState rows read by joint name (a broadcaster's order is not guaranteed): (stamps, publish s,
    positions (n, len(names)), velocities, whether every message carried velocities), in arrival order. The first
    `required` names must be in every message; the others, when absent, hold `fill` (len(names),)."""
    stamps = np.empty(len(rows))
    pos = np.tile(np.asarray(fill, dtype=np.float64), (len(rows), 1))
    vel = np.zeros_like(pos)
    has_vel = True
    for i, (_, _, m) in enumerate(rows):
        stamps[i] = stamp_s(m)
        index = {n: j for j, n in enumerate(m.name)}
        missing = [n for n in names[:required] if n not in index]
        if missing:
            raise LogError(f"{path}: {topic}: message {i} lacks joint(s) {missing} (has {list(m.name)})")
        if len(m.position) != len(m.name):
            raise LogError(f"{path}: {topic}: message {i} has {len(m.name)} names and {len(m.position)} positions")
        has_vel = has_vel and len(m.velocity) == len(m.name)
        for j, n in enumerate(names):
            if n in index:
                pos[i, j] = m.position[index[n]]
                vel[i, j] = m.velocity[index[n]] if has_vel else 0.0
    bad = ~np.isfinite(pos).all(axis=1) | ~np.isfinite(vel).all(axis=1) | ~np.isfinite(stamps)
    if bad.any():
        i = int(np.argmax(bad))
        raise LogError(f"{path}: {topic}: a non-finite value in message {i} (stamp {stamps[i]:.3f} s)")
    return stamps, publish_s(rows), pos, vel, has_vel


def order_stamps(topic: str, stamps: np.ndarray, path: Path) -> tuple[np.ndarray, int, int]:
    """Indices that sort the messages by stamp without duplicates; (order, duplicates, reordered).
    A stamp further behind the newest than REORDER_TOLERANCE_S is a clock reset: refused."""
    newest = np.maximum.accumulate(stamps)
    back = newest - stamps
    if (back > REORDER_TOLERANCE_S).any():
        i = int(np.argmax(back > REORDER_TOLERANCE_S))
        raise LogError(
            f"{path}: {topic}: stamps go back {back[i]:.3f} s at message {i} (stamp {stamps[i]:.3f} s after "
            f"{newest[i]:.3f} s): a clock reset or a merged log; split the log there"
        )
    reordered = int((back > 0).sum())
    order = np.argsort(stamps, kind="stable")
    keep = np.concatenate([[True], np.diff(stamps[order]) > 1e-9])
    return order[keep], int((~keep).sum()), reordered


def period_and_gaps(topic: str, stamps: np.ndarray, path: Path) -> tuple[float, list[tuple[float, float]]]:
    """The median state period and the drops (start s from the first stamp, length s) of sorted stamps."""
    dt = np.diff(stamps)
    period = float(np.median(dt))
    if not period > 0:
        raise LogError(f"{path}: {topic}: no time passes between messages")
    return period, [(float(stamps[i] - stamps[0]), float(dt[i])) for i in np.flatnonzero(dt > GAP_FACTOR * period)]


class CommandsInEffect(NamedTuple):
    commands: np.ndarray  # (T, D) the command in effect over each state step
    commanded: np.ndarray  # (T,) bool: some command was in effect
    # (T,) how many commands fell in each step; more than one and the robot may have used an earlier one for part
    # of the step (or, stepped by commands, taken a step for each)
    published: np.ndarray
    superseded: int  # commands followed by another before the next state: in effect for no step


def commands_in_effect(state_pub: np.ndarray, cmd_pub: np.ndarray, cmd_vals: np.ndarray) -> CommandsInEffect:
    """The command in effect over each state step: the newest published after state k's publication and before
    state k+1's (held otherwise)."""
    order = np.argsort(cmd_pub, kind="stable")
    cmd_pub, cmd_vals = cmd_pub[order], cmd_vals[order]
    step = np.searchsorted(state_pub, cmd_pub, side="right") - 1
    commands = np.zeros((len(state_pub), cmd_vals.shape[1]))
    commanded = np.zeros(len(state_pub), dtype=bool)
    last = np.searchsorted(step, np.arange(len(state_pub)), side="right") - 1  # newest command at or before each step
    has = last >= 0
    commands[has] = cmd_vals[last[has]]
    commanded[has] = True
    published = np.bincount(step[step >= 0], minlength=len(state_pub))[: len(state_pub)]
    return CommandsInEffect(commands, commanded, published, len(step) - len(np.unique(step)))


def evenly_spaced(t: np.ndarray, commanded: np.ndarray, period_s: float, k0: int, length: int) -> bool:
    """Whether states k0 .. k0+length are evenly spaced (no drop) and commanded throughout."""
    if k0 < 0 or k0 + length >= len(t):
        return False
    dt = np.diff(t[k0 : k0 + length + 1])
    return bool(np.all(dt < GAP_FACTOR * period_s) and commanded[k0 : k0 + length].all())


class StepLog:
    """What the joint logs (arm, quadruped) share, for a dataclass with t, commanded, report and published."""

    @property
    def duration_s(self) -> float:
        return float(self.t[-1] - self.t[0]) if len(self.t) else 0.0

    def contiguous(self, k0: int, length: int) -> bool:
        """Whether states k0 .. k0+length are evenly spaced (no drop) and commanded throughout by one known command
        per step (none superseded within a step)."""
        if not evenly_spaced(self.t, self.commanded, self.report.period_s, k0, length):
            return False
        return self.published is None or bool((self.published[k0 : k0 + length] <= 1).all())


def log_topics(path: str | Path) -> set[str]:
    """The topic names of an MCAP file from its summary (no message is decoded); empty when the file has none or
    cannot be read (the robot's reader then says why in its one line)."""
    from mcap.reader import make_reader

    try:
        with open(path, "rb") as f:
            summary = make_reader(f).get_summary()
    except Exception:  # noqa: BLE001 - any unreadable file: the reader reports it
        return set()
    return {c.topic for c in summary.channels.values()} if summary is not None else set()


def held_points(rows: list, state_pub: np.ndarray) -> np.ndarray | None:
    """The PointStamped in effect at each state (a goal, a reach target), by publish time, held; the first one
    before it arrived. None without messages."""
    return held_values(rows, state_pub, lambda m: (m.point.x, m.point.y, m.point.z))


def held_values(rows: list, state_pub: np.ndarray, values: Callable[[object], tuple]) -> np.ndarray | None:
    """values(message) of the message in effect at each state, by publish time, held; the first one before it
    arrived. None without messages."""
    if not rows:
        return None
    pub = publish_s(rows)
    vals = np.array([values(m) for _, _, m in rows], dtype=np.float64)
    order = np.argsort(pub, kind="stable")
    idx = np.clip(np.searchsorted(pub[order], state_pub, side="right") - 1, 0, len(vals) - 1)
    return vals[order][idx]
