"""Byte ranges and content types of served artifacts (robot_rl.dashboard.artifacts), without a server."""

from __future__ import annotations

from pathlib import Path

import pytest

from robot_rl.dashboard.artifacts import Unsatisfiable, byte_range, content_type


@pytest.mark.parametrize(
    ("header", "size", "expected"),
    [
        (None, 10, None),
        ("", 10, None),
        ("bytes=0-", 10, (0, 9)),
        ("bytes=2-5", 10, (2, 5)),
        ("bytes=3-100", 10, (3, 9)),
        ("bytes=-3", 10, (7, 9)),
        ("bytes=-30", 10, (0, 9)),
        (" bytes=1-1 ", 10, (1, 1)),
        ("bytes=0-0,2-3", 10, None),  # multi-range: the whole file
        ("bytes=-", 10, None),
        ("items=0-1", 10, None),
    ],
)
def test_byte_range(header: str | None, size: int, expected: tuple[int, int] | None) -> None:
    assert byte_range(header, size) == expected


@pytest.mark.parametrize(("header", "size"), [("bytes=10-", 10), ("bytes=5-2", 10), ("bytes=0-", 0), ("bytes=-0", 10)])
def test_unsatisfiable_range(header: str, size: int) -> None:
    with pytest.raises(Unsatisfiable):
        byte_range(header, size)


def test_content_type() -> None:
    assert content_type(Path("videos/a.MP4")) == ("video/mp4", "inline")
    assert content_type(Path("bundle/policy.onnx")) == ("application/octet-stream", "attachment")
    assert content_type(Path("guidance/page.html")) == ("application/octet-stream", "attachment")
