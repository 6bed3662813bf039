"""Language models behind one small interface. `LiteLLMModel` reaches any provider litellm knows
(hosted APIs with a key from the environment, or a local vLLM/Ollama/OpenAI-compatible server at
`api_base`). Every call is accounted (tokens, USD; unpriced local models cost 0), checked against the
run's budget *before* it is made, retried only where retrying can help, cached on disk by request
hash (a resumed or replayed run never pays twice), and reported to the run log.

Nothing here touches the network at import time: litellm's price map is the bundled one
(LITELLM_LOCAL_MODEL_COST_MAP is set before litellm is imported).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from kernopt.errors import InfraError

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
