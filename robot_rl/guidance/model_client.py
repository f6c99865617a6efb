"""One OpenAI-compatible chat client shared by the VLM keypoint selector and the LLM planner.

Every answer is JSON validated against a pydantic schema (plus an optional semantic ``check``);
nothing a model returns is ever executed. Answers are cached on disk under a hash of the
*semantic* request key (task, layout seed, prompt version, ...), so a recorded experiment replays
bit-for-bit without a model server. Images are provenance, not part of the key: a re-rendered
camera frame that differs by a few pixels still hits the cache.

Modes (``ModelConfig.mode``):

- ``live``: always ask the server; the cache is neither read nor written.
- ``record``: read the cache; on a miss ask the server and cache the validated answer.
- ``replay``: cache only; a miss raises :class:`CacheMiss`.
- ``replay_or_oracle``: cache; on a miss use the caller's oracle (no server needed).

Retries are ours only (``max_retries`` extra attempts): an invalid answer is sent back to the
model with the validation error; a transport failure (HTTP error, timeout, refused connection,
non-JSON body) is retried with the same messages.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import http.client
import json
import logging
import os
import re
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from robot_conventions.options import NONNEG, NONNEG_INT, POSITIVE, Range, option

log = logging.getLogger("robot_rl.guidance")

MODES = ("live", "record", "replay", "replay_or_oracle")
ON_FAILURE = ("oracle", "error")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_BODY_BYTES = 16 * 1024 * 1024  # a chat completion is a few KB; refuse to buffer a runaway body
_FEEDBACK_CHARS = 2000  # keep the rejection message short enough not to crowd the model's context
_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


@dataclass
class ModelConfig:
    base_url: str = "http://127.0.0.1:8000/v1"  # vLLM, Ollama (/v1), llama.cpp server, hosted APIs
    model: str = "local-model"
    api_key_env: str = "ROBOT_RL_MODEL_API_KEY"  # key read from this env var; absent -> no Authorization header
    timeout_s: float = option(30.0, POSITIVE)
    # extra attempts after the first; invalid answers are sent back with the error
    max_retries: int = option(2, NONNEG_INT)
    mode: str = "replay_or_oracle"  # live | record | replay | replay_or_oracle
    on_failure: str = "oracle"  # oracle | error: what happens when all attempts fail
    cache_dir: str = ".robot_rl_cache/model"  # on-disk cache of answers
    temperature: float = option(0.0, Range(0, 2))
    # wait before retrying a transport failure (doubles each time, capped at 8 s)
    retry_backoff_s: float = option(0.5, NONNEG)


class ModelError(RuntimeError):
    """No valid answer: the message says what was asked and lists each attempt's error."""


class CacheMiss(ModelError):
    """Replay mode and the request key is not cached."""


class CacheCorrupt(ModelError):
    """A cache file exists but cannot be used (bad JSON, wrong key, answer fails the schema/check)."""


@dataclass
class Answer:
    value: BaseModel  # validated against the schema (and the check)
    source: str  # "model" | "cache" | "oracle"
    attempts: int  # HTTP requests made for this answer
    errors: list[str] = field(default_factory=list)  # one entry per failed attempt, in order
    key_hash: str = ""  # sha256 of the canonical semantic key
    raw_text: str | None = None  # the model's raw text (None for oracle)


def user_message(text: str, images: Sequence[bytes] = ()) -> dict:
    """OpenAI chat 'user' message; PNG bytes become data:image/png;base64 image_url parts after the text part.

    Without images the content is a plain string: some local servers accept only that for text.
    """
    if not images:
        return {"role": "user", "content": text}
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    for i, image in enumerate(images):
        data = bytes(image)  # also accepts the uint8 array cv2.imencode returns
        if not data.startswith(PNG_SIGNATURE):
            # A JPEG labelled image/png is silently misread by some servers; fail here instead.
            raise ValueError(f"image {i} is not PNG data (encode it with cv2.imencode('.png', ...))")
        url = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
        parts.append({"type": "image_url", "image_url": {"url": url}})
    return {"role": "user", "content": parts}


def system_message(text: str) -> dict:
    return {"role": "system", "content": text}


def canonical_json(obj: Any) -> str:
    """Deterministic JSON (sorted keys, compact) used for the cache key hash."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_json_default)


def _json_default(obj: Any) -> Any:
    # numpy scalars/arrays show up in keys (layout seeds, mark coordinates); store them as plain JSON.
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"request key value {obj!r} of type {type(obj).__name__} is not JSON-serialisable")


def extract_json(text: str) -> str:
    """The JSON text inside a model answer: the whole answer, a ```json fenced block, or the first {...} object.

    Raises ValueError (with the parse error) when none of these is valid JSON.
    """
    candidates = [text.strip()]
    candidates += [m.group(1).strip() for m in re.finditer(r"```[A-Za-z]*[ \t]*\n?(.*?)```", text, re.DOTALL)]
    first_error: str | None = None
    for cand in candidates:
        try:
            json.loads(cand)
            return cand
        except ValueError as e:
            first_error = first_error or f"{e}"
    for cand in _balanced_objects(text):
        try:
            json.loads(cand)
            return cand
        except ValueError as e:
            first_error = first_error or f"{e}"
    if "{" not in text:
        raise ValueError("the answer contains no JSON object")
    raise ValueError(f"the answer contains no valid JSON object ({first_error})")


def _balanced_objects(text: str):
    """Yield each balanced {...} substring, in order of its opening brace (string-aware)."""
    start = text.find("{")
    while start != -1:
        depth, in_str, esc = 0, False, False
        for i in range(start, len(text)):
            c = text[i]
            if in_str:
                if esc:
                    esc = False
                elif c == "\\":
                    esc = True
                elif c == '"':
                    in_str = False
            elif c == '"':
                in_str = True
            elif c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    yield text[start : i + 1]
                    break
        start = text.find("{", start + 1)


def image_hashes(messages: list[dict]) -> list[str]:
    """sha256 of every data-URL image in the messages (the decoded bytes), in order."""
    out: list[str] = []
    for msg in messages:
        content = msg.get("content")
        if not isinstance(content, list):
            continue
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "image_url":
                continue
            url = str((part.get("image_url") or {}).get("url", ""))
            if url.startswith("data:") and "," in url:
                try:
                    data = base64.b64decode(url.split(",", 1)[1], validate=True)
                except (binascii.Error, ValueError):
                    data = url.encode()
            else:
                data = url.encode()  # a remote image: its URL is what we know
            out.append(hashlib.sha256(data).hexdigest())
    return out


class _TransportError(Exception):
    """The server gave no usable completion (HTTP error, timeout, no connection, bad body)."""


class ModelClient:
    def __init__(self, cfg: ModelConfig):
        if cfg.mode not in MODES:
            raise ValueError(f"model mode {cfg.mode!r} is not one of {', '.join(MODES)}")
        if cfg.on_failure not in ON_FAILURE:
            raise ValueError(f"on_failure {cfg.on_failure!r} is not one of {', '.join(ON_FAILURE)}")
        if cfg.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {cfg.max_retries}")
        self.cfg = cfg
        self.requests_made = 0
        self.url = cfg.base_url.rstrip("/") + "/chat/completions"
        host = urllib.parse.urlsplit(self.url).hostname or ""
        # Loopback servers must not go through an http_proxy from the environment; remote ones may.
        handlers = [urllib.request.ProxyHandler({})] if host in _LOOPBACK_HOSTS else []
        self._opener = urllib.request.build_opener(*handlers)

    # ---- public -------------------------------------------------------------------------------
    def full_key(self, key: dict, schema: type[BaseModel]) -> dict:
        """The cached key: the caller's semantic key plus the model and schema names (JSON-normalised)."""
        return json.loads(canonical_json({"request": key, "model": self.cfg.model, "schema": schema.__name__}))

    def cache_path(self, key_hash: str) -> Path:
        return Path(self.cfg.cache_dir) / f"{key_hash}.json"

    def ask(
        self,
        *,
        key: dict,
        messages: list[dict],
        schema: type[BaseModel],
        check: Callable[[BaseModel], None] | None = None,
        oracle: Callable[[], BaseModel] | None = None,
    ) -> Answer:
        """One validated answer for ``key``: from the cache, the model or the oracle, by mode."""
        cfg = self.cfg
        full_key = self.full_key(key, schema)
        key_hash = hashlib.sha256(canonical_json(full_key).encode("utf-8")).hexdigest()
        path = self.cache_path(key_hash)

        if cfg.mode != "live":
            try:
                cached = self._read_cache(path, full_key, schema, check)
            except CacheCorrupt as e:
                if cfg.mode != "record":
                    raise
                log.warning("%s; re-asking the model and overwriting it", e)
                cached = None
            if cached is not None:
                value, raw_text = cached
                return Answer(value, "cache", 0, [], key_hash, raw_text)
            if cfg.mode in ("replay", "replay_or_oracle"):
                if cfg.mode == "replay_or_oracle" and oracle is not None:
                    log.info("cache miss %s (%s): using the oracle", key_hash[:12], _short(key))
                    return Answer(self._oracle_value(oracle, schema, check, key), "oracle", 0, [], key_hash, None)
                raise CacheMiss(
                    f"no cached {schema.__name__} answer for key {_short(key)} (model {cfg.model!r}, hash {key_hash}) "
                    f"in cache dir {cfg.cache_dir!r} (mode={cfg.mode}); run once with mode=record against a "
                    "model server to fill it"
                )

        value, raw_text, attempts, errors = self._ask_model(key, messages, schema, check)
        if value is None:
            if cfg.on_failure == "oracle" and oracle is not None:
                # the run prints one line for all its fallbacks (robot_rl.commands.train.used_guidance)
                log.info("model gave no valid answer after %d attempts; using the oracle", attempts)
                return Answer(
                    self._oracle_value(oracle, schema, check, key), "oracle", attempts, errors, key_hash, None
                )
            lines = "\n".join(f"  attempt {i + 1}: {err}" for i, err in enumerate(errors))
            raise ModelError(
                f"model {cfg.model!r} at {self.url} gave no valid {schema.__name__} answer for key {_short(key)} "
                f"after {attempts} attempt(s):\n{lines}"
            )
        if cfg.mode == "record":
            self._write_cache(path, full_key, value, raw_text, messages, attempts, errors)
        return Answer(value, "model", attempts, errors, key_hash, raw_text)

    # ---- model ------------------------------------------------------------------------------
    def _ask_model(
        self,
        key: dict,
        messages: list[dict],
        schema: type[BaseModel],
        check: Callable[[BaseModel], None] | None,
    ) -> tuple[BaseModel | None, str | None, int, list[str]]:
        cfg = self.cfg
        total = cfg.max_retries + 1
        conversation = list(messages)
        errors: list[str] = []
        transport_failures = 0
        for attempt in range(1, total + 1):
            body = {
                "model": cfg.model,
                "messages": conversation,
                "temperature": cfg.temperature,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": schema.__name__, "schema": schema.model_json_schema()},
                },
            }
            log.info("model request %d/%d: %s %s key=%s", attempt, total, cfg.model, schema.__name__, _short(key))
            try:
                content = self._post(body)
            except _TransportError as e:
                errors.append(str(e))
                log.info("model attempt %d/%d failed: %s", attempt, total, e)
                transport_failures += 1
                if attempt < total and cfg.retry_backoff_s > 0:
                    time.sleep(min(8.0, cfg.retry_backoff_s * 2 ** (transport_failures - 1)))
                continue  # same messages again
            try:
                value = schema.model_validate_json(extract_json(content))
                if check is not None:
                    check(value)
            except ValueError as e:  # pydantic's ValidationError and json errors are ValueErrors too
                reason = _reason(e)[:_FEEDBACK_CHARS]
                errors.append(f"invalid answer: {reason}")
                log.info("model attempt %d/%d: invalid answer: %s", attempt, total, reason)
                conversation = conversation + [
                    {"role": "assistant", "content": content},
                    user_message(
                        f"Your answer was rejected: {reason}. "
                        "Reply again with only a JSON object that follows the schema."
                    ),
                ]
                continue
            return value, content, attempt, errors
        return None, None, total, errors

    def _post(self, body: dict) -> str:
        """POST one chat completion; the assistant's text, or _TransportError."""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        api_key = os.environ.get(self.cfg.api_key_env)
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        req = urllib.request.Request(self.url, data=json.dumps(body).encode("utf-8"), headers=headers, method="POST")
        self.requests_made += 1
        try:
            with self._opener.open(req, timeout=self.cfg.timeout_s) as resp:
                raw = resp.read(MAX_BODY_BYTES + 1)
        except urllib.error.HTTPError as e:
            try:
                detail = e.read(2000).decode("utf-8", "replace")
            except (OSError, http.client.HTTPException):
                detail = ""
            raise _TransportError(f"HTTP {e.code} {e.reason}: {_one_line(detail)[:500]}") from None
        except urllib.error.URLError as e:
            if isinstance(e.reason, TimeoutError):
                raise _TransportError(f"timed out after {self.cfg.timeout_s} s ({self.url})") from None
            raise _TransportError(f"connection error ({self.url}): {e.reason}") from None
        except TimeoutError:
            raise _TransportError(f"timed out after {self.cfg.timeout_s} s ({self.url})") from None
        except (OSError, http.client.HTTPException) as e:
            raise _TransportError(f"connection error ({self.url}): {type(e).__name__}: {e}") from None
        if len(raw) > MAX_BODY_BYTES:
            raise _TransportError(f"response body larger than {MAX_BODY_BYTES} bytes")
        text = raw.decode("utf-8", "replace")
        try:
            data = json.loads(text)
        except ValueError:
            raise _TransportError(f"non-JSON HTTP body: {_one_line(text)[:200]!r}") from None
        try:
            content = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise _TransportError(f"no choices[0].message.content in the response: {_one_line(text)[:200]}") from None
        if not isinstance(content, str):
            raise _TransportError(f"choices[0].message.content is {type(content).__name__}, not text")
        return content

    def _oracle_value(
        self,
        oracle: Callable[[], BaseModel],
        schema: type[BaseModel],
        check: Callable[[BaseModel], None] | None,
        key: dict,
    ) -> BaseModel:
        value = oracle()
        try:
            value = value if isinstance(value, schema) else schema.model_validate(value)
            if check is not None:
                check(value)
        except ValueError as e:  # a bug in the oracle, not a model failure: say so
            raise ModelError(f"oracle answer for key {_short(key)} is not a valid {schema.__name__}: {e}") from e
        return value

    # ---- cache ------------------------------------------------------------------------------
    def _read_cache(
        self,
        path: Path,
        full_key: dict,
        schema: type[BaseModel],
        check: Callable[[BaseModel], None] | None,
    ) -> tuple[BaseModel, str | None] | None:
        if not path.exists():
            return None
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(entry, dict) or "answer" not in entry:
                raise ValueError("not a cache entry (no 'answer')")
            if entry.get("key") != full_key:
                raise ValueError("the stored key does not match the request key")
            value = schema.model_validate(entry["answer"])
            if check is not None:
                check(value)
        except (OSError, ValueError) as e:
            raise CacheCorrupt(
                f"corrupt model cache file {path}: {_reason(e)[:500]} (delete it, or re-record with mode=record)"
            ) from e
        raw = entry.get("raw_text")
        return value, raw if isinstance(raw, str) else None

    def _write_cache(
        self,
        path: Path,
        full_key: dict,
        value: BaseModel,
        raw_text: str | None,
        messages: list[dict],
        attempts: int,
        errors: list[str],
    ) -> None:
        entry = {
            "key": full_key,
            "answer": value.model_dump(mode="json"),
            "raw_text": raw_text,
            "model": self.cfg.model,
            "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "provenance": {"image_sha256": image_hashes(messages), "attempts": attempts, "errors": errors},
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        # Atomic: a reader (or a crash) never sees half a file.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem[:16]}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(entry, f, indent=2, sort_keys=True, ensure_ascii=False)
                f.write("\n")
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        log.info("cached model answer %s", path)


def _reason(e: Exception) -> str:
    """A validation error as one short line the model can act on: 'field.path: what is wrong; ...'."""
    if isinstance(e, ValidationError):
        items = [f"{'.'.join(str(p) for p in err['loc']) or 'answer'}: {err['msg']}" for err in e.errors()]
        return f"{e.error_count()} schema error(s): " + "; ".join(items)
    return _one_line(str(e))


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _short(key: dict, limit: int = 300) -> str:
    text = canonical_json(key)
    return text if len(text) <= limit else text[: limit - 3] + "..."
