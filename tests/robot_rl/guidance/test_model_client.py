"""ModelClient against a real OpenAI-compatible HTTP server on loopback (ReplayServer): answers,
cache modes, retries with feedback, transport failures, API key header, corrupt cache files."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import socket
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from robot_rl.guidance.model_client import (
    Answer,
    CacheMiss,
    ModelClient,
    ModelConfig,
    ModelError,
    extract_json,
    system_message,
    user_message,
)
from robot_rl.guidance.replay_server import ReplayServer

KEY_ENV = "ROBOT_RL_TEST_MODEL_KEY"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))  # the signature is all user_message checks
OTHER_PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64, 0, -1))
VALID = '{"mark": 2, "reason": "the handle"}'


class Pick(BaseModel):
    mark: int
    reason: str = ""


def known_marks(value: BaseModel) -> None:
    assert isinstance(value, Pick)
    if value.mark not in (1, 2, 3):
        raise ValueError(f"unknown mark {value.mark}; choose one of 1, 2, 3")


def key(seed: int = 3) -> dict:
    return {"kind": "keypoints", "prompt_version": "kp-v1", "layout_seed": seed, "camera": "front", "marks": [1, 2, 3]}


def messages(images: tuple[bytes, ...] = (PNG,)) -> list[dict]:
    return [system_message("You pick marks."), user_message("Which mark is the handle?", images)]


def oracle() -> Pick:
    return Pick(mark=1, reason="oracle")


@pytest.fixture(autouse=True)
def _no_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)


@pytest.fixture
def make_server() -> Iterator:
    servers: list[ReplayServer] = []

    def make(*responses: dict, match: list[str] | None = None) -> ReplayServer:
        server = ReplayServer([{"match": match or ["handle"], "responses": list(responses)}]).start()
        servers.append(server)
        return server

    yield make
    for s in servers:
        s.close()


def client(url: str, tmp_path: Path, **kw) -> ModelClient:
    cfg = ModelConfig(
        base_url=url,
        model="test-vlm",
        api_key_env=KEY_ENV,
        timeout_s=kw.pop("timeout_s", 2.0),
        cache_dir=str(tmp_path / "cache"),
        retry_backoff_s=0.0,
        **kw,
    )
    return ModelClient(cfg)


def ask(c: ModelClient, *, seed: int = 3, images: tuple[bytes, ...] = (PNG,), with_oracle: bool = True) -> Answer:
    return c.ask(
        key=key(seed), messages=messages(images), schema=Pick, check=known_marks, oracle=oracle if with_oracle else None
    )


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


# 1 ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "content",
    [VALID, f"Sure! Here it is:\n```json\n{VALID}\n```\nHope that helps.", f"I choose {VALID} because of the grip."],
    ids=["plain", "fenced", "embedded"],
)
def test_valid_answer_and_request_shape(make_server, tmp_path: Path, content: str) -> None:
    server = make_server({"content": content})
    c = client(server.url, tmp_path, mode="live")
    ans = ask(c)
    assert ans.value == Pick(mark=2, reason="the handle")
    assert (ans.source, ans.attempts, ans.errors, ans.raw_text) == ("model", 1, [], content)
    assert len(ans.key_hash) == 64 and c.requests_made == 1
    (req,) = server.requests
    assert req["model"] == "test-vlm" and req["temperature"] == 0.0 and req["_path"] == "/v1/chat/completions"
    assert req["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Pick", "schema": Pick.model_json_schema()},
    }
    assert req["messages"][0] == {"role": "system", "content": "You pick marks."}
    text_part, image_part = req["messages"][1]["content"]
    assert text_part == {"type": "text", "text": "Which mark is the handle?"}
    url = image_part["image_url"]["url"]
    assert image_part["type"] == "image_url" and url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == PNG
    assert not (tmp_path / "cache").exists()  # live mode never writes the cache


def test_extract_json_cases() -> None:
    assert json.loads(extract_json('note {"a": "}{", "b": {"c": 1}} tail')) == {"a": "}{", "b": {"c": 1}}
    assert json.loads(extract_json('{not json} then {"x": 1}')) == {"x": 1}
    with pytest.raises(ValueError, match="no JSON object"):
        extract_json("mark two, definitely")
    with pytest.raises(ValueError):
        user_message("x", [b"\xff\xd8\xff jpeg"])  # not PNG


# 2 ---------------------------------------------------------------------------------------------
def test_record_writes_cache_and_second_run_makes_no_requests(make_server, tmp_path: Path) -> None:
    server = make_server({"content": VALID})
    first = ask(client(server.url, tmp_path, mode="record"))
    assert first.source == "model"
    path = tmp_path / "cache" / f"{first.key_hash}.json"
    entry = json.loads(path.read_text())
    assert entry["answer"] == {"mark": 2, "reason": "the handle"} and entry["model"] == "test-vlm"
    assert entry["key"]["request"]["layout_seed"] == 3 and entry["key"]["schema"] == "Pick"
    assert entry["provenance"]["image_sha256"] == [hashlib.sha256(PNG).hexdigest()]
    assert entry["provenance"]["attempts"] == 1 and entry["raw_text"] == VALID
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp files left behind

    again = client(server.url, tmp_path, mode="record")
    hit = ask(again)
    assert (hit.source, hit.attempts, hit.value, hit.key_hash) == ("cache", 0, first.value, first.key_hash)
    assert again.requests_made == 0 and len(server.requests) == 1

    # The image is provenance, not key: another frame still hits, and the file keeps the first image's hash.
    other_image = ask(again, images=(OTHER_PNG,))
    assert other_image.source == "cache" and again.requests_made == 0
    assert json.loads(path.read_text())["provenance"]["image_sha256"] == [hashlib.sha256(PNG).hexdigest()]

    miss = ask(again, seed=4)
    assert miss.source == "model" and miss.key_hash != first.key_hash and again.requests_made == 1
    assert len(server.requests) == 2

    # Another model name is another key.
    other_model = ModelClient(ModelConfig(**{**again.cfg.__dict__, "model": "other-vlm", "mode": "replay"}))
    with pytest.raises(CacheMiss):
        ask(other_model)


# 3 ---------------------------------------------------------------------------------------------
def test_replay_miss_and_oracle(make_server, tmp_path: Path) -> None:
    server = make_server({"content": VALID})
    c = client(server.url, tmp_path, mode="replay")
    with pytest.raises(CacheMiss) as info:
        ask(c)
    msg = str(info.value)
    assert '"layout_seed":3' in msg and str(tmp_path / "cache") in msg and "record" in msg

    c = client(server.url, tmp_path, mode="replay_or_oracle")
    ans = ask(c)
    assert (ans.source, ans.attempts, ans.raw_text, ans.value) == ("oracle", 0, None, oracle())
    with pytest.raises(CacheMiss):
        ask(c, with_oracle=False)
    assert c.requests_made == 0 and server.requests == []

    ask(client(server.url, tmp_path, mode="record"))
    assert ask(c).source == "cache" and ask(client(server.url, tmp_path, mode="replay")).source == "cache"


# 4 ---------------------------------------------------------------------------------------------
def test_invalid_json_is_sent_back_then_valid(make_server, tmp_path: Path) -> None:
    server = make_server({"content": "Mark two, definitely."}, {"content": VALID})
    ans = ask(client(server.url, tmp_path, mode="live"))
    assert (ans.source, ans.attempts, len(ans.errors)) == ("model", 2, 1)
    assert "no JSON object" in ans.errors[0]
    retry_msgs = server.requests[1]["messages"]
    assert retry_msgs[:2] == server.requests[0]["messages"]
    assert retry_msgs[2] == {"role": "assistant", "content": "Mark two, definitely."}
    feedback = retry_msgs[3]["content"]
    assert retry_msgs[3]["role"] == "user" and feedback.startswith("Your answer was rejected:")
    assert "no JSON object" in feedback and feedback.endswith(
        "Reply again with only a JSON object that follows the schema."
    )


def test_schema_invalid_answer_is_retried(make_server, tmp_path: Path) -> None:
    server = make_server({"content": '{"mark": "left"}'}, {"content": VALID})
    ans = ask(client(server.url, tmp_path, mode="live"))
    assert ans.attempts == 2 and "mark" in ans.errors[0]
    assert "mark: Input should be a valid integer" in server.requests[1]["messages"][-1]["content"]


def test_check_rejection_is_retried_with_reason(make_server, tmp_path: Path) -> None:
    server = make_server({"content": '{"mark": 99}'}, {"content": VALID})
    ans = ask(client(server.url, tmp_path, mode="record"))
    assert ans.attempts == 2 and ans.value.mark == 2
    assert "unknown mark 99" in server.requests[1]["messages"][-1]["content"]
    entry = json.loads((tmp_path / "cache" / f"{ans.key_hash}.json").read_text())
    assert entry["provenance"]["attempts"] == 2 and "99" in entry["provenance"]["errors"][0]


# 5 ---------------------------------------------------------------------------------------------
def test_http_500_then_valid_resends_same_messages(make_server, tmp_path: Path) -> None:
    server = make_server({"status": 500, "body": "backend exploded"}, {"content": VALID})
    ans = ask(client(server.url, tmp_path, mode="live"))
    assert ans.attempts == 2 and "HTTP 500" in ans.errors[0] and "backend exploded" in ans.errors[0]
    assert server.requests[1]["messages"] == server.requests[0]["messages"]


def test_timeout_then_valid(make_server, tmp_path: Path) -> None:
    server = make_server({"delay_s": 3.0, "content": VALID}, {"content": VALID})
    ans = ask(client(server.url, tmp_path, mode="live", timeout_s=0.5))
    assert ans.source == "model" and ans.attempts == 2
    assert len(ans.errors) == 1 and "timed out after 0.5 s" in ans.errors[0]


@pytest.mark.parametrize("bad", [{"status": 429, "body": "slow down"}, {"raw_body": "<html>gateway</html>"}])
def test_all_attempts_fail_falls_back_to_oracle(make_server, tmp_path: Path, bad: dict) -> None:
    server = make_server(bad)
    c = client(server.url, tmp_path, mode="record", max_retries=2)
    ans = ask(c)
    assert (ans.source, ans.attempts, ans.value, ans.raw_text) == ("oracle", 3, oracle(), None)
    assert len(ans.errors) == 3 and len(server.requests) == 3 and c.requests_made == 3
    assert not (tmp_path / "cache").exists()  # an oracle fallback is never cached


def test_all_attempts_fail_raises_listing_each(make_server, tmp_path: Path) -> None:
    server = make_server({"status": 500, "body": "down"}, {"raw_body": "not json"}, {"content": '{"mark": 99}'})
    c = client(server.url, tmp_path, mode="live", on_failure="error")
    with pytest.raises(ModelError) as info:
        ask(c)
    msg = str(info.value)
    assert "after 3 attempt(s)" in msg and "Pick" in msg and '"layout_seed":3' in msg
    assert (
        "attempt 1: HTTP 500" in msg and "attempt 2: non-JSON HTTP body" in msg and "attempt 3: invalid answer" in msg
    )
    assert "unknown mark 99" in msg and not isinstance(info.value, CacheMiss)


def test_connection_refused(tmp_path: Path) -> None:
    url = closed_port_url()
    ans = ask(client(url, tmp_path, mode="live"))
    assert ans.source == "oracle" and len(ans.errors) == 3 and all("connection" in e for e in ans.errors)
    c = client(url, tmp_path, mode="live", on_failure="error", max_retries=1)
    with pytest.raises(ModelError, match=r"attempt 2: connection error"):
        ask(c)
    assert c.requests_made == 2
    with pytest.raises(ModelError):  # on_failure=oracle but no oracle given: still an error
        ask(client(url, tmp_path, mode="live"), with_oracle=False)


# 6 ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("max_retries", [0, 1, 3])
def test_exactly_max_retries_plus_one_requests(make_server, tmp_path: Path, max_retries: int) -> None:
    server = make_server({"status": 503, "body": "overloaded"})
    c = client(server.url, tmp_path, mode="live", on_failure="error", max_retries=max_retries)
    with pytest.raises(ModelError):
        ask(c)
    assert len(server.requests) == max_retries + 1 == c.requests_made


# 7 ---------------------------------------------------------------------------------------------
def test_api_key_header_only_when_env_set(make_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = make_server({"content": VALID})
    ask(client(server.url, tmp_path, mode="live"))
    assert "authorization" not in server.requests[0]["_headers"]
    monkeypatch.setenv(KEY_ENV, "sekrit-123")
    ask(client(server.url, tmp_path, mode="live"))
    assert server.requests[1]["_headers"]["authorization"] == "Bearer sekrit-123"


# 8 ---------------------------------------------------------------------------------------------
def test_corrupt_cache_file(make_server, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    server = make_server({"content": VALID})
    first = ask(client(server.url, tmp_path, mode="record"))
    path = tmp_path / "cache" / f"{first.key_hash}.json"
    good = json.loads(path.read_text())
    path.write_text('{"key": {"trunc')
    for mode in ("replay", "replay_or_oracle"):
        with pytest.raises(ModelError, match="corrupt model cache file") as info:
            ask(client(server.url, tmp_path, mode=mode))
        assert str(path) in str(info.value)
    assert len(server.requests) == 1  # never silently re-asked

    # An answer that no longer satisfies the schema is corrupt too.
    path.write_text(json.dumps({**good, "answer": {"mark": "x"}}))
    with pytest.raises(ModelError, match="corrupt model cache file .*mark: Input should be a valid integer"):
        ask(client(server.url, tmp_path, mode="replay"))
    path.write_text(json.dumps({**good, "key": {**good["key"], "model": "someone-else"}}))
    with pytest.raises(ModelError, match="stored key does not match"):
        ask(client(server.url, tmp_path, mode="replay"))

    # Record mode re-asks and overwrites, with a warning.
    with caplog.at_level(logging.WARNING, logger="robot_rl.guidance"):
        ans = ask(client(server.url, tmp_path, mode="record"))
    assert ans.source == "model" and len(server.requests) == 2
    assert any(str(path) in r.getMessage() for r in caplog.records)
    assert json.loads(path.read_text())["answer"]["mark"] == 2


# 9 ---------------------------------------------------------------------------------------------
def test_server_binds_loopback_only(tmp_path: Path) -> None:
    with ReplayServer([{"match": [], "responses": [{"content": VALID}]}]) as server:
        host, port = server.socket.getsockname()[:2]
        assert host == "127.0.0.1" and server.url == f"http://127.0.0.1:{port}/v1"
        with urllib.request.urlopen(server.url + "/models", timeout=2) as resp:
            assert json.load(resp)["data"][0]["id"] == "replay"
    for host in ("0.0.0.0", "192.168.1.10", "example.invalid"):
        with pytest.raises(ValueError, match="allow_remote"):
            ReplayServer([], host=host)


def test_server_miss_and_recordings_file(tmp_path: Path) -> None:
    rec = tmp_path / "rec.json"
    rec.write_text(json.dumps([{"match": ["handle", "front"], "responses": [{"content": VALID}]}]))
    with ReplayServer(rec) as server:
        c = client(server.url, tmp_path, mode="live", on_failure="error", max_retries=0)
        with pytest.raises(ModelError, match="HTTP 404.*replay_miss"):
            ask(c)  # "front" occurs in no message text (it is only in the key)
    with pytest.raises(ValueError, match="recording 0"):
        ReplayServer([{"match": ["x"], "responses": []}])
