"""A scripted OpenAI-compatible chat server on 127.0.0.1, for tests that talk real HTTP to a "model".

A scenario is a list of steps (or a mapping with a `steps` list), each one answer or one fault:

    - content: "text"            # an answer; optional finish_reason (default "stop"),
      finish_reason: length      #   usage {prompt_tokens, completion_tokens} (default: a rough
      usage: {prompt_tokens: 10, completion_tokens: 5}   #   estimate), delay_s (answer late), model (the name answered with)
    - content: null              # an answer with no content at all
    - status: 429                # an HTTP error with an OpenAI-style error body; optional headers,
      headers: {Retry-After: "1"}  #   message
    - status: 500
    - hang_s: 30                 # accept the request, answer nothing for 30 s, then close
    - truncate: true             # headers promise more body than is sent, then the connection closes
    - garbage: true              # 200 with a body that is not JSON

Which step answers a request: first the first step with a `match` regex that matches the last user
message (searched with re.search, DOTALL) and is not used up; otherwise the next unused step without
`match`, in order. A step is used once unless it has `repeat: true` (then it answers every request
that reaches it, e.g. an endpoint that always hangs). A request no step answers gets 400
"scenario exhausted" (not retried by the client), and is counted in `server.unanswered`.

Every request is recorded (`server.requests`: path, body JSON, `messages_hash` = sha256 of the
canonical JSON of the messages, the step index that answered), so a test can assert how many
requests came (`server.count`) and whether any was sent twice (`server.repeated`).

Use (tests/ is on sys.path under pytest):

    pytest_plugins = ["llm_server"]                  # in the test module (or once, in conftest.py)

    def test_x(llm_server):                          # a factory fixture: start servers inside the test
        server = llm_server("chaos_429.yaml")        # a file under tests/scenarios/, a path, or a list
        ... ModelConfig(name="openai/scripted", api_base=server.api_base, ...) ...
        assert server.count == 2 and server.repeated == 0

    from llm_server import serve                     # without the fixture (e.g. around a subprocess
    with serve("roles.yaml") as server:              #   running `kernopt optimize`; the server keeps
        ...                                          #   its state across a kill and a --resume)

`server.api_base` is the URL to give litellm (`.../v1`); the model name is free ("openai/<anything>"
with any key, or "hosted_vllm/<anything>" with none). Importing this module yourself before pytest
registers it as a plugin costs a harmless "cannot be rewritten" warning; conftest.py is the clean
place for `pytest_plugins`.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

SCENARIOS = Path(__file__).resolve().parent / "scenarios"
CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")


def load_scenario(scenario: str | Path | list[dict[str, Any]] | dict[str, Any]) -> list[dict[str, Any]]:
    """The steps of a scenario: a list of steps as is, a mapping with `steps`, or a JSON/YAML file
    (a bare name is looked up in tests/scenarios/)."""
    if isinstance(scenario, (str, Path)):
        path = Path(scenario)
        if not path.is_absolute() and not path.exists():
            path = SCENARIOS / path
        text = path.read_text()
        scenario = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    if isinstance(scenario, dict):
        scenario = scenario.get("steps") or []
    if not isinstance(scenario, list) or not all(isinstance(s, dict) for s in scenario):
        raise ValueError("a scenario is a list of steps (mappings), or a mapping with `steps`")
    return [dict(s) for s in scenario]


def messages_hash(messages: Any) -> str:
    return hashlib.sha256(json.dumps(messages, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@dataclass
class Request:
    """One request the server received."""

    path: str
    body: Any
    messages_hash: str
    step: int | None  # index of the step that answered, None if none did
    at: float = field(default_factory=time.monotonic)

    @property
    def last_user(self) -> str:
        return _last_user(self.body)


def _last_user(body: Any) -> str:
    messages = body.get("messages", []) if isinstance(body, dict) else []
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, list):  # OpenAI content parts
                return "".join(p.get("text", "") for p in content if isinstance(p, dict))
            return str(content or "")
    return ""


class ScriptedServer:
    """The server; start with `start()` (or use `serve`/the fixture), stop with `stop()`."""

    def __init__(self, steps: list[dict[str, Any]]):
        self.steps = steps
        self.used = [False] * len(steps)
        self.requests: list[Request] = []
        self.unanswered = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False  # a hanging handler must not hold up stop()
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), name="llm-server", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_port}"

    @property
    def api_base(self) -> str:
        """What to give litellm as api_base (OpenAI clients append /chat/completions)."""
        return self.url + "/v1"

    @property
    def count(self) -> int:
        return len(self.requests)

    @property
    def repeated(self) -> int:
        """Requests whose messages had already been sent in an earlier request."""
        seen: set[str] = set()
        n = 0
        for r in self.requests:
            n += r.messages_hash in seen
            seen.add(r.messages_hash)
        return n

    def start(self) -> ScriptedServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def _choose(self, body: Any, path: str) -> tuple[int | None, dict[str, Any] | None]:
        """Pick the answering step and record the request (under one lock: steps are used once)."""
        last_user = _last_user(body)
        with self._lock:
            chosen = None
            for i, s in enumerate(self.steps):
                if "match" in s and not self.used[i] and re.search(s["match"], last_user, re.DOTALL):
                    chosen = i
                    break
            if chosen is None:
                chosen = next((i for i, s in enumerate(self.steps) if "match" not in s and not self.used[i]), None)
            if chosen is not None and not self.steps[chosen].get("repeat"):
                self.used[chosen] = True
            if chosen is None:
                self.unanswered += 1
            messages = body.get("messages") if isinstance(body, dict) else None
            self.requests.append(Request(path, body, messages_hash(messages), chosen))
        return chosen, (self.steps[chosen] if chosen is not None else None)


def _handler(server: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # one request per connection: a fault never leaks into the next

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path not in CHAT_PATHS:
                self._json(404, _error(f"no route {self.path}", "not_found_error"))
                return
            try:
                body = json.loads(raw)
            except ValueError:
                self._json(400, _error("request body is not JSON", "invalid_request_error"))
                return
            index, step = server._choose(body, self.path)
            if step is None:
                self._json(400, _error("scripted server: scenario exhausted, no step answers this request", "invalid_request_error"))
                return
            self._answer(step, index or 0, body)

        def _answer(self, step: dict[str, Any], index: int, body: dict[str, Any]) -> None:
            if "hang_s" in step:
                server._stopping.wait(float(step["hang_s"]))
                self.close_connection = True
                return
            if step.get("truncate"):
                payload = json.dumps(_completion(step, index, body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload) + 1000))
                self.end_headers()
                self.wfile.write(payload[: len(payload) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            if step.get("garbage"):
                self._send(200, b"<html>502 upstream gone? {not json", "application/json")
                return
            if "status" in step:
                status = int(step["status"])
                kind = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
                        429: "rate_limit_error"}.get(status, "server_error")
                self._json(status, _error(step.get("message", f"scripted {status}"), kind), step.get("headers", {}))
                return
            if step.get("delay_s"):
                server._stopping.wait(float(step["delay_s"]))
            self._json(200, _completion(step, index, body))

        def _json(self, status: int, obj: Any, headers: dict[str, Any] | None = None) -> None:
            self._send(status, json.dumps(obj).encode(), "application/json", headers)

        def _send(self, status: int, payload: bytes, ctype: str, headers: dict[str, Any] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(payload)))
            for k, v in (headers or {}).items():
                self.send_header(k, str(v))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


def _error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def _completion(step: dict[str, Any], index: int, body: dict[str, Any]) -> dict[str, Any]:
    content = step.get("content")
    prompt_chars = sum(len(str(m.get("content", ""))) for m in body.get("messages", []) if isinstance(m, dict))
    usage = {"prompt_tokens": prompt_chars // 4 + 1, "completion_tokens": len(content or "") // 4 + 1}
    usage.update(step.get("usage") or {})
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    return {
        "id": f"chatcmpl-scripted-{index}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": step.get("model", body.get("model", "scripted")),  # a gateway may answer with its own name
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "finish_reason": step.get("finish_reason", "stop")}],
        "usage": usage,
    }


@contextmanager
def serve(scenario: str | Path | list[dict[str, Any]] | dict[str, Any]) -> Iterator[ScriptedServer]:
    """A running server for the scenario, stopped on exit."""
    server = ScriptedServer(load_scenario(scenario)).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def llm_server() -> Iterator[Any]:
    """Factory: `llm_server(scenario) -> ScriptedServer`, running until the test ends."""
    servers: list[ScriptedServer] = []

    def start(scenario: str | Path | list[dict[str, Any]] | dict[str, Any]) -> ScriptedServer:
        server = ScriptedServer(load_scenario(scenario)).start()
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.stop()
