"""The litellm model: accounting, cache, budget (litellm mock_response), and the endpoint's failures
through real HTTP to the scripted server (tests/llm_server.py). Every HTTP test asserts how many
requests reached the server, so a retry is a real request and "no retry" is one request."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kernopt.config import ModelConfig
from kernopt.errors import InfraError
from kernopt.model import Completion, LiteLLMModel, ModelBudgetExhausted, ModelError, Spend, get_model, request_hash

pytest_plugins = ["llm_server"]  # the `llm_server` fixture

KEY_ENV = "KERNOPT_TEST_LLM_KEY"
MSGS = [{"role": "system", "content": "You optimize kernels."}, {"role": "user", "content": "make gemm faster"}]
FAST: dict[str, Any] = {"backoff_base_s": 0.01, "backoff_max_s": 0.05}


@pytest.fixture(autouse=True)
def dummy_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test-not-a-real-key")


def http_model(server: Any, cache_dir: Path | None = None, log: Any = None, **cfg: Any) -> LiteLLMModel:
    config = ModelConfig(name="openai/scripted", api_base=server.api_base, api_key_env=KEY_ENV,
                         timeout_s=cfg.pop("timeout_s", 5), max_retries=cfg.pop("max_retries", 3), **cfg)
    return LiteLLMModel(config, cache_dir, log, max_wait_s=5, **FAST)


def mock_model(cache_dir: Path | None = None, log: Any = None, name: str = "gpt-4o-mini", spend: Spend | None = None,
               **cfg: Any) -> LiteLLMModel:
    return LiteLLMModel(ModelConfig(name=name, **cfg), cache_dir, log, spend, **FAST)


# --- litellm mock_response -------------------------------------------------------------------


def test_accounting_from_usage_and_price_map() -> None:
    records: list[dict[str, Any]] = []
    model = mock_model(log=records.append)
    c = model.complete(MSGS, role="planner", mock_response="use tiling")
    assert c.text == "use tiling" and c.finish_reason == "stop" and not c.cached
    assert (c.prompt_tokens, c.completion_tokens) == (10, 20)  # litellm's mock usage
    import litellm  # only now: the model has set the offline price map before loading it

    expected = sum(litellm.cost_per_token(model="gpt-4o-mini", prompt_tokens=10, completion_tokens=20))
    assert c.cost_usd == pytest.approx(expected) and c.cost_usd > 0
    assert model.spend == Spend(usd=c.cost_usd, tokens=30, calls=1)
    model.complete(MSGS + [{"role": "user", "content": "again"}], role="executor", mock_response="x")
    assert model.spend.calls == 2 and model.spend.tokens == 60 and model.spend.usd == pytest.approx(2 * expected)
    assert [r["role"] for r in records] == ["planner", "executor"]
    assert records[0]["messages"] == MSGS and records[0]["completion"]["text"] == "use tiling"
    assert os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP") == "True"


def test_unpriced_model_costs_zero_but_counts_tokens() -> None:
    model = mock_model(name="openai/my-local-model")
    c = model.complete(MSGS, role="planner", mock_response="ok")
    assert c.cost_usd == 0.0 and c.prompt_tokens + c.completion_tokens == 30
    assert model.spend == Spend(usd=0.0, tokens=30, calls=1)


def test_cache_hit_costs_nothing_and_is_flagged(tmp_path: Path) -> None:
    records: list[dict[str, Any]] = []
    model = mock_model(tmp_path, records.append)
    first = model.complete(MSGS, role="planner", mock_response="tile it")
    spent = model.spend.model_copy()
    path = tmp_path / first.request_hash[:2] / f"{first.request_hash}.json"
    assert path.exists() and not list(tmp_path.rglob("*.tmp"))
    assert json.loads(path.read_text())["completion"]["text"] == "tile it"

    again = model.complete(MSGS, role="planner", mock_response="tile it")
    assert again.cached and again.cost_usd == 0.0 and again.text == "tile it"
    assert again.request_hash == first.request_hash
    assert model.spend == spent
    assert records[-1]["completion"]["cached"] is True and len(records) == 2

    # a resumed run (a new model object, its spend restored) answers from the same files for free
    resumed = mock_model(tmp_path, spend=spent.model_copy())
    assert resumed.complete(MSGS, role="planner", mock_response="tile it").cached
    assert resumed.spend == spent

    # anything that changes the answer changes the hash: a miss, and it is paid for
    other = model.complete(MSGS, role="planner", temperature=0.1, mock_response="tile it")
    assert not other.cached and model.spend.calls == 2


def test_cache_off_writes_nothing(tmp_path: Path) -> None:
    model = mock_model(tmp_path, cache=False)
    model.complete(MSGS, role="planner", mock_response="a")
    assert not model.complete(MSGS, role="planner", mock_response="a").cached
    assert model.spend.calls == 2 and not any(tmp_path.iterdir())


def test_usd_budget_stops_before_the_call(tmp_path: Path) -> None:
    model = mock_model(tmp_path, max_usd=1e-9)
    model.complete(MSGS, role="planner", mock_response="a")  # starts under the limit, ends over it
    with pytest.raises(ModelBudgetExhausted, match="max_usd") as e:
        model.complete(MSGS + [{"role": "user", "content": "more"}], role="executor", mock_response="b")
    assert "\n" not in str(e.value)
    assert model.spend.calls == 1
    assert model.complete(MSGS, role="planner", mock_response="a").cached  # what is cached stays free


def test_token_budget_stops_before_any_request(llm_server: Any) -> None:
    server = llm_server([{"content": "one", "usage": {"prompt_tokens": 40, "completion_tokens": 10}}, {"content": "two"}])
    model = http_model(server, max_tokens_total=50)
    model.complete(MSGS, role="planner")
    with pytest.raises(ModelBudgetExhausted, match="max_tokens_total 50"):
        model.complete(MSGS + [{"role": "user", "content": "more"}], role="planner")
    assert server.count == 1 and model.spend.tokens == 50


def test_request_hash_ignores_the_key_and_transport() -> None:
    base = {"model": "m", "api_base": None, "messages": MSGS, "temperature": 0.7, "max_tokens": 100}
    h = request_hash(base)
    assert h == request_hash({**base, "api_key": "sk-1", "timeout": 3, "num_retries": 0})
    for change in ({"model": "n"}, {"api_base": "http://x"}, {"temperature": 0.0}, {"max_tokens": 99},
                   {"messages": MSGS[:1]}, {"top_p": 0.9}):
        assert request_hash({**base, **change}) != h


# --- real HTTP to the scripted server --------------------------------------------------------


def test_success_through_http(llm_server: Any, tmp_path: Path) -> None:
    server = llm_server([{"content": "__global__ void k() {}", "usage": {"prompt_tokens": 12, "completion_tokens": 8}}])
    model = get_model(http_model(server).config, tmp_path)
    c = model.complete(MSGS, role="executor")
    assert c == Completion(text="__global__ void k() {}", model="openai/scripted", prompt_tokens=12, completion_tokens=8,
                           cost_usd=0.0, finish_reason="stop", request_hash=c.request_hash)
    assert server.count == 1
    body = server.requests[0].body
    assert body["model"] == "scripted" and body["messages"] == MSGS
    assert body["temperature"] == 0.7 and body["max_tokens"] == 4096
    assert model.complete(MSGS, role="executor").cached and server.count == 1  # the cache, not the server
    assert "sk-test-not-a-real-key" not in "".join(p.read_text() for p in tmp_path.rglob("*.json"))


def test_429_retry_after_is_honoured(llm_server: Any) -> None:
    server = llm_server("chaos_429.yaml")
    t0 = time.monotonic()
    c = http_model(server).complete(MSGS, role="planner")
    waited = server.requests[1].at - server.requests[0].at
    assert c.text == "after the wait" and server.count == 2
    assert 0.9 <= waited < 3, waited  # the backoff alone would be ~0.01 s
    assert time.monotonic() - t0 < 5


def test_retry_after_is_capped(llm_server: Any) -> None:
    server = llm_server([{"status": 429, "headers": {"Retry-After": "30"}}, {"content": "ok"}])
    model = http_model(server)
    model.max_wait_s = 0.2
    t0 = time.monotonic()
    assert model.complete(MSGS, role="planner").text == "ok"
    assert time.monotonic() - t0 < 3 and server.count == 2


def test_500_twice_then_success(llm_server: Any) -> None:
    server = llm_server("chaos_500.yaml")
    model = http_model(server)
    c = model.complete(MSGS, role="critic")
    assert c.text == "third time lucky" and server.count == 3
    assert model.spend == Spend(usd=0.0, tokens=18, calls=1)  # failed attempts are not answers


def test_retries_exhausted_is_an_infra_error(llm_server: Any) -> None:
    server = llm_server([{"status": 503, "repeat": True}])
    records: list[dict[str, Any]] = []
    model = http_model(server, log=records.append, max_retries=2)
    with pytest.raises(ModelError) as e:
        model.complete(MSGS, role="planner")
    assert isinstance(e.value, InfraError)
    msg = str(e.value)
    assert "\n" not in msg and "HTTP 503" in msg and "after 3 attempts" in msg and server.api_base in msg
    assert server.count == 3 and server.repeated == 2  # the same request, retried
    assert records == [{"role": "planner", "messages": MSGS, "error": msg}]
    assert model.spend == Spend()


def test_hang_times_out_and_is_retried(llm_server: Any) -> None:
    server = llm_server("chaos_hang.yaml")
    t0 = time.monotonic()
    with pytest.raises(ModelError, match="Timeout"):
        http_model(server, timeout_s=0.5, max_retries=1).complete(MSGS, role="planner")
    assert server.count == 2
    assert 1.0 <= time.monotonic() - t0 < 5


def test_truncated_and_garbage_bodies_are_retried(llm_server: Any) -> None:
    server = llm_server("chaos_malformed.json")
    assert http_model(server).complete(MSGS, role="executor").text == "clean at last"
    assert server.count == 3


@pytest.mark.parametrize("fault", [{"truncate": True}, {"garbage": True}])
def test_malformed_for_good_is_a_model_error(llm_server: Any, fault: dict[str, Any]) -> None:
    server = llm_server([{**fault, "repeat": True}])
    with pytest.raises(ModelError, match="after 2 attempts"):
        http_model(server, max_retries=1).complete(MSGS, role="executor")
    assert server.count == 2


@pytest.mark.parametrize("status,message,hint", [
    (401, "Incorrect API key provided", f"check the API key in ${KEY_ENV}"),
    (404, "The model `scripted` does not exist", "check the model name"),
    (400, "This model's maximum context length is 8192 tokens", "longer context"),
])
def test_client_errors_are_not_retried(llm_server: Any, status: int, message: str, hint: str) -> None:
    server = llm_server([{"status": status, "message": message, "repeat": True}])
    with pytest.raises(ModelError) as e:
        http_model(server).complete(MSGS, role="planner")
    assert server.count == 1
    assert f"HTTP {status}" in str(e.value) and hint in str(e.value) and "attempts" not in str(e.value)


def test_missing_key_fails_before_any_request(llm_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    server = llm_server([{"content": "never"}])
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(ModelError, match=f"{KEY_ENV} .* is not set"):
        http_model(server).complete(MSGS, role="planner")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = LiteLLMModel(ModelConfig(name="openai/scripted", api_base=server.api_base), None, **FAST)
    with pytest.raises(ModelError, match="needs OPENAI_API_KEY"):
        model.complete(MSGS, role="planner")
    assert server.count == 0
    # a local vLLM server needs no key at all
    vllm = LiteLLMModel(ModelConfig(name="hosted_vllm/scripted", api_base=server.api_base), None, **FAST)
    assert vllm.complete(MSGS, role="planner").text == "never" and server.count == 1


def test_finish_reason_length_and_empty_content(llm_server: Any) -> None:
    server = llm_server([{"content": "int main() { for (", "finish_reason": "length"}, {"content": None}])
    model = http_model(server)
    cut = model.complete(MSGS, role="executor")
    assert cut.finish_reason == "length" and cut.text == "int main() { for ("
    empty = model.complete(MSGS + [{"role": "user", "content": "again"}], role="executor")
    assert empty.text == "" and server.count == 2


def test_rules_answer_by_role(llm_server: Any) -> None:
    server = llm_server("roles.yaml")
    model = http_model(server, cache=False)

    def ask(text: str) -> str:
        return model.complete([{"role": "user", "content": text}], role="x").text

    assert ask("Write the plan") == ask("PLAN again") == "1. tile the loops\n2. parallelize the outer loop"
    assert ask("critique this") == "bound by memory bandwidth; try blocking"
    assert ask("critique again") == "first code"  # the critique rule is used up: next in order
    assert ask("write code") == "second code"
    with pytest.raises(ModelError, match="scenario exhausted"):
        ask("write more code")
    assert server.count == 6 and server.unanswered == 1 and server.repeated == 0
    assert [r.step for r in server.requests] == [0, 0, 1, 2, 3, None]


def test_scenario_files_load(llm_server: Any) -> None:
    for path in (Path(__file__).parent / "scenarios").iterdir():
        assert isinstance(llm_server(path.name).steps, list), path


def test_import_is_cheap_and_offline() -> None:
    """`import kernopt.model` leaves litellm unimported; using the model sets the local price map
    before litellm loads, and nothing connects anywhere but loopback."""
    code = r"""
import os, sys, socket
outside = []
def hook(event, args):
    if event == "socket.connect":
        addr = args[1]
        if isinstance(addr, tuple) and addr[0] not in ("127.0.0.1", "::1", "localhost"):
            outside.append(addr)
    if event == "socket.getaddrinfo" and args[0] not in ("127.0.0.1", "::1", "localhost"):
        outside.append(args[0])
sys.addaudithook(hook)
import kernopt.model as m
assert "litellm" not in sys.modules, "litellm imported at import time"
assert "LITELLM_LOCAL_MODEL_COST_MAP" not in os.environ
from kernopt.config import ModelConfig
c = m.LiteLLMModel(ModelConfig(name="gpt-4o-mini"), None).complete([{"role": "user", "content": "hi"}], role="t", mock_response="ok")
assert c.cost_usd > 0, c
assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
print("OUTSIDE", outside)
"""
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "OUTSIDE []" in r.stdout, r.stdout


def test_priced_by_the_model_asked_for_and_usage_never_refunds(llm_server: Any) -> None:
    # a gateway answering with its own model name must not make a priced model free (--max-usd would
    # never stop the run), and a server's negative token counts must not lower the spend
    server = llm_server([{"content": "a", "model": "my-gateway-name", "usage": {"prompt_tokens": 100_000, "completion_tokens": 0}},
                         {"content": "b", "usage": {"prompt_tokens": -1_000_000, "completion_tokens": -5}}])
    config = ModelConfig(name="openai/gpt-4o-mini", api_base=server.api_base, api_key_env=KEY_ENV, max_usd=1.0, cache=False)
    model = LiteLLMModel(config, None, None, **FAST)
    first = model.complete(MSGS, role="planner")
    assert first.cost_usd == pytest.approx(100_000 * 0.15e-6)  # litellm's bundled price for gpt-4o-mini input
    second = model.complete([*MSGS, {"role": "user", "content": "again"}], role="planner")
    assert (second.prompt_tokens, second.completion_tokens, second.cost_usd) == (0, 0, 0.0)
    assert model.spend.tokens == 100_000 and model.spend.usd == pytest.approx(first.cost_usd)
