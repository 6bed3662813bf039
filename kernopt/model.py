"""Language models behind one small interface. `LiteLLMModel` reaches any provider litellm knows
(hosted APIs with a key from the environment, or a local vLLM/Ollama/OpenAI-compatible server at
`api_base`). Every call is accounted (tokens, USD; unpriced local models cost 0), checked against the
run's budget *before* it is made, retried only where retrying can help, cached on disk by request
hash (a resumed or replayed run never pays twice), and reported to the run log.

Nothing here touches the network at import time: litellm's price map is the bundled one
(LITELLM_LOCAL_MODEL_COST_MAP is set before litellm is imported).
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import math
import os
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from kernopt.config import ModelConfig
from kernopt.errors import InfraError

if TYPE_CHECKING:
    import tenacity

Message = dict[str, str]  # {"role": "system" | "user" | "assistant", "content": ...}


class Completion(BaseModel):
    """One model answer and what it cost."""

    model_config = ConfigDict(extra="forbid")

    text: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = Field(0.0, description="0 for unpriced (local) models.")
    finish_reason: str | None = Field(None, description='"length" means the answer was cut off (truncated).')
    cached: bool = Field(False, description="Answered from the request cache: nothing was spent.")
    request_hash: str = ""


class Spend(BaseModel):
    """What the models of one run have used so far (cached answers excluded)."""

    usd: float = 0.0
    tokens: int = 0
    calls: int = 0

    def add(self, completion: Completion) -> None:
        """Count one answer; a cached one cost nothing (the run that first asked paid for it)."""
        if not completion.cached:
            self.usd += completion.cost_usd
            self.tokens += completion.prompt_tokens + completion.completion_tokens
            self.calls += 1


class ModelBudgetExhausted(Exception):
    """The run's USD or token limit is reached: no further model call may start. Not an error: the
    search stops cleanly and keeps its best (the search catches it like its own budget)."""


class ModelError(InfraError):
    """The endpoint failed for good (retries used up, authentication, context length, malformed
    responses): an infrastructure error, never scored as a candidate failure."""


# A call record for the run log: role, the messages sent, the completion (or the error text).
CallLog = Callable[[dict[str, Any]], None]


class Model(Protocol):
    """`complete(messages, role=...)`: `role` names the caller (planner, executor, critic, judge) for
    the run log and the spend breakdown; options (temperature, max_tokens, ...) pass through."""

    name: str
    spend: Spend

    def complete(self, messages: list[Message], *, role: str, **opts: Any) -> Completion:
        ...


# --- litellm behind the interface -------------------------------------------------------------

# Options that change how a request travels, not what it answers: left out of the request hash.
_TRANSPORT_OPTS = frozenset({"timeout", "num_retries", "max_retries", "api_key"})
_CACHE_VERSION = 1


def _litellm() -> Any:
    """litellm, imported on first use: its import takes seconds, and without this variable it
    fetches a price map from GitHub (the bundled copy is the one we want, offline)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True  # otherwise it prints "Give Feedback" banners on every error
    return litellm


def request_hash(request: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of what determines an answer (never the key)."""
    payload = {"v": _CACHE_VERSION, **{k: v for k, v in request.items() if k not in _TRANSPORT_OPTS}}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


def retry_after_s(exc: BaseException) -> float | None:
    """Seconds a 429 asks us to wait (Retry-After / retry-after-ms), or None. litellm's mapped
    exceptions carry the provider's headers in `litellm_response_headers`; their `response` is a
    fresh httpx.Response without them."""
    headers = getattr(exc, "litellm_response_headers", None) or getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    h = {str(k).lower(): str(v) for k, v in headers.items()}
    try:
        if "retry-after-ms" in h:
            return max(0.0, float(h["retry-after-ms"]) / 1000)
        if "retry-after" in h:
            value = h["retry-after"].strip()
            try:
                return max(0.0, float(value))
            except ValueError:
                return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (ValueError, TypeError, OverflowError):
        return None
    return None


class LiteLLMModel:
    """Any model litellm reaches (see the module docstring). `backoff_base_s`/`backoff_max_s` shape
    the exponential backoff between retries; `max_wait_s` caps a Retry-After the server asks for.

    A cached answer costs nothing, so it is served even when the budget is spent; the budget is
    checked before anything would be sent."""

    def __init__(self, config: ModelConfig, cache_dir: Path | None, log: CallLog | None = None,
                 spend: Spend | None = None, *, backoff_base_s: float = 1.0, backoff_max_s: float = 30.0,
                 max_wait_s: float = 60.0):
        self.config = config
        self.name = config.name
        self.cache_dir = cache_dir if config.cache else None
        self.log = log
        self.spend = spend if spend is not None else Spend()
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.max_wait_s = max_wait_s
        self._lock = threading.Lock()

    def complete(self, messages: list[Message], *, role: str, **opts: Any) -> Completion:
        request: dict[str, Any] = {
            "model": self.config.name,
            "api_base": self.config.api_base,
            "messages": messages,
            "temperature": opts.pop("temperature", self.config.temperature),
            "max_tokens": opts.pop("max_tokens", self.config.max_tokens),
            **opts,
        }
        h = request_hash(request)
        cached = self._cache_get(h)
        if cached is not None:
            self._log({"role": role, "messages": messages, "completion": cached.model_dump()})
            return cached
        self._check_budget()
        try:
            response = self._call(request)
            completion = self._completion(response, h)
        except ModelError as e:
            self._log({"role": role, "messages": messages, "error": str(e)})
            raise
        with self._lock:
            self.spend.add(completion)
        # The log first: spend is rebuilt from it on resume, and a cached answer counts nothing. A kill
        # between the two costs one repeated request, never uncounted spend.
        self._log({"role": role, "messages": messages, "completion": completion.model_dump()})
        self._cache_put(h, request, completion)
        return completion

    # -- budget, cache, log

    def _check_budget(self) -> None:
        c, s = self.config, self.spend
        with self._lock:
            if c.max_usd is not None and s.usd >= c.max_usd:
                raise ModelBudgetExhausted(f"model budget reached: ${s.usd:.4f} spent of max_usd ${c.max_usd:.4f}")
            if c.max_tokens_total is not None and s.tokens >= c.max_tokens_total:
                raise ModelBudgetExhausted(f"model budget reached: {s.tokens} tokens used of max_tokens_total {c.max_tokens_total}")

    def _cache_path(self, h: str) -> Path | None:
        return self.cache_dir / h[:2] / f"{h}.json" if self.cache_dir is not None else None

    def _cache_get(self, h: str) -> Completion | None:
        path = self._cache_path(h)
        if path is None or not path.exists():
            return None
        try:
            data = json.loads(path.read_text())["completion"]
            return Completion.model_validate({**data, "cached": True, "cost_usd": 0.0, "request_hash": h})
        except (OSError, ValueError, KeyError, TypeError):
            return None  # unreadable: ask again (the rename makes a torn file unlikely, not impossible)

    def _cache_put(self, h: str, request: dict[str, Any], completion: Completion) -> None:
        path = self._cache_path(h)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        record = {"request": {k: v for k, v in request.items() if k not in _TRANSPORT_OPTS}, "completion": completion.model_dump()}
        with open(tmp, "w") as f:
            json.dump(record, f, default=str)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def _log(self, record: dict[str, Any]) -> None:
        if self.log is not None:
            self.log(record)

    # -- the call, with retries

    def _call(self, request: dict[str, Any]) -> Any:
        import httpx
        import openai
        import tenacity

        litellm = _litellm()
        kwargs = {**request, "timeout": request.get("timeout", self.config.timeout_s), "num_retries": 0, "max_retries": 0}
        if "mock_response" not in request:
            kwargs["api_key"] = self._api_key(litellm)
        if kwargs.get("api_base") is None:
            kwargs.pop("api_base")
        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.config.max_retries + 1),
            wait=self._wait,
            retry=tenacity.retry_if_exception(lambda e: _retryable(litellm, e)),
            reraise=True,
        )
        try:
            return retrying(litellm.completion, **kwargs)
        except (openai.OpenAIError, httpx.HTTPError) as e:  # litellm's mapped errors derive from openai's
            attempts = retrying.statistics.get("attempt_number", 1)
            raise ModelError(self._explain(litellm, e, attempts)) from e

    def _api_key(self, litellm: Any) -> str | None:
        env = self.config.api_key_env
        if env:
            if not os.environ.get(env):
                raise ModelError(f"model {self.name}: the environment variable {env} (api_key_env) is not set; export the key in it")
            return os.environ[env]
        missing = litellm.validate_environment(model=self.name, api_base=self.config.api_base).get("missing_keys") or []
        if missing:
            hint = " (a local server without auth: any value, or name the model hosted_vllm/...)" if self.config.api_base else ""
            raise ModelError(f"model {self.name} needs {', '.join(missing)} in the environment{hint}")
        return None

    def _wait(self, state: tenacity.RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if exc is not None:
            asked = retry_after_s(exc)
            if asked is not None:
                return min(asked, self.max_wait_s)
        backoff = min(self.backoff_max_s, self.backoff_base_s * 2 ** (state.attempt_number - 1))
        return backoff * random.uniform(0.5, 1.0)

    def _explain(self, litellm: Any, e: BaseException, attempts: int) -> str:
        status = getattr(e, "status_code", None)
        provider = getattr(e, "llm_provider", None) or self.name.split("/", 1)[0]
        where = self.config.api_base or provider
        text = " ".join(str(getattr(e, "message", None) or e).split())
        if len(text) > 200:
            text = text[:197] + "..."
        if isinstance(e, litellm.AuthenticationError | litellm.PermissionDeniedError):
            todo = "check the API key" + (f" in ${self.config.api_key_env}" if self.config.api_key_env else "")
        elif isinstance(e, litellm.ContextWindowExceededError):
            todo = "the prompt is longer than the model's context: use a model with a longer context or a smaller max_tokens"
        elif isinstance(e, litellm.NotFoundError):
            todo = "check the model name and api_base"
        elif isinstance(e, litellm.BadRequestError):
            todo = "the endpoint refused the request: check the model name, api_base and options"
        elif isinstance(e, litellm.RateLimitError):
            todo = "rate limited: wait, or raise max_retries"
        else:
            todo = f"is the endpoint at {where} up? raise timeout_s or max_retries if it is slow"
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        return f"model {self.name} ({provider}{f', HTTP {status}' if status else ''}) failed{tries}: {type(e).__name__}: {text} -- {todo}"

    # -- the answer

    def _completion(self, response: Any, h: str) -> Completion:
        litellm = _litellm()
        choices = getattr(response, "choices", None) or []
        if not choices:
            raise ModelError(f"model {self.name} answered without choices (malformed response)")
        choice = choices[0]
        message = getattr(choice, "message", None)
        usage = getattr(response, "usage", None)
        prompt_tokens = max(0, int(getattr(usage, "prompt_tokens", 0) or 0))  # a server's negative counts must not refund spend
        completion_tokens = max(0, int(getattr(usage, "completion_tokens", 0) or 0))
        # Priced by the model asked for (config.name), not by the name the server answers with:
        # gateways and vLLM answer with their own names, which would make every call free.
        try:
            p, c = litellm.cost_per_token(model=self.name, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
            cost = float(p) + float(c)
        except Exception:  # unpriced (local) models: litellm raises its own "not mapped" errors
            try:
                cost = float(litellm.completion_cost(completion_response=response) or 0.0)
            except Exception:
                cost = 0.0
        if not math.isfinite(cost) or cost < 0:
            cost = 0.0
        return Completion(
            text=(getattr(message, "content", None) or "") if message is not None else "",
            model=self.name,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=cost,
            finish_reason=getattr(choice, "finish_reason", None),
            request_hash=h,
        )


def _retryable(litellm: Any, e: BaseException) -> bool:
    """Rate limits, 5xx, timeouts, dropped or garbled answers; never auth, context length, bad
    requests or unknown models (asking again cannot change those)."""
    never = (litellm.AuthenticationError, litellm.PermissionDeniedError, litellm.ContextWindowExceededError,
             litellm.BadRequestError, litellm.NotFoundError, litellm.UnprocessableEntityError)
    if isinstance(e, never):
        return False
    again = (litellm.RateLimitError, litellm.InternalServerError, litellm.ServiceUnavailableError, litellm.BadGatewayError,
             litellm.APIConnectionError, litellm.Timeout)
    if isinstance(e, again):
        return True
    status = getattr(e, "status_code", None)  # litellm.APIError: a status it has no class for
    return isinstance(e, litellm.APIError) and (status is None or status >= 500)


def get_model(config: ModelConfig, cache_dir: Path | None, log: CallLog | None = None, spend: Spend | None = None) -> Model:
    """The model for a config (litellm reaches every provider; there is one implementation)."""
    return LiteLLMModel(config, cache_dir, log, spend)


def check_model(config: ModelConfig) -> None:
    """Before a run exists: the name maps to a provider litellm knows, and that provider's key is in the
    environment where it needs one (exactly what the first call would check). One-line UserError; no network."""
    from kernopt.errors import UserError

    litellm = _litellm()
    try:
        litellm.get_llm_provider(config.name, api_base=config.api_base)
    except Exception:
        raise UserError(f"model {config.name!r}: litellm knows no provider for this name; give provider/model "
                        "(openai/gpt-4o-mini, anthropic/..., ollama/..., hosted_vllm/... for a local server)") from None
    try:
        LiteLLMModel(config, None)._api_key(litellm)
    except ModelError as e:
        raise UserError(str(e)) from None
