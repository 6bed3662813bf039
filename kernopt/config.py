"""Pydantic configs, one per component. `extra="forbid"`: a typo is an error, not a silent default."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kernopt.errors import UserError


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EvalConfig(_Config):
    """How the evaluator verifies and times candidates (the task supplies sizes and tolerances)."""

    rounds: int | None = Field(None, ge=2, description="Interleaved timing rounds; None = the task's value. "
                               "Below 5 nothing can be significant (the 1% rank test runs on per-process medians).")
    reps: int | None = Field(None, ge=1, description="Timed calls per process; None = the task's value.")
    remeasure_rounds: int = Field(7, ge=2, description="Rounds when re-measuring the winner in a fresh sandbox.")
    race_check: bool = Field(True, description="Run the ThreadSanitizer race check on OpenMP candidates. Off "
                             "(--no-race-check), their verdict is `off` and every summary says so; on, a candidate whose "
                             "check cannot run is rejected.")
    race_static: Literal["dynamic", "require"] = Field("dynamic", description="A kernel the static race check cannot "
                                                       "prove race-free: `dynamic` lets a clean sanitizer run decide, "
                                                       "unless the kernel may store where the sanitizer is blind (libm "
                                                       "output pointers, calls through pointers or to unknown functions: "
                                                       "then `unproven`, rejected); `require` rejects it as `unproven`.")
    race_threads: list[int] = Field(default_factory=lambda: [3], description="Thread counts for the -O1 race build.")
    race_threads_o0: list[int] = Field(default_factory=lambda: [8, 16], description="Thread counts for a second race build at -O0.")
    race_compiler: str = Field("clang", description="The clang that builds the ThreadSanitizer binary (e.g. clang-16 where "
                               "the default clang's sanitizer does not run).")
    early_stop_ratio: float = Field(1.5, gt=1, description="Stop timing after two rounds when the candidate is this much slower.")
    plausible_max_speedup: float = Field(10.0, gt=1, description="Speedups above this are flagged for review.")
    build_timeout_s: float = Field(60.0, gt=0, description="Wall clock for one compile or link.")
    verify_timeout_s: float = Field(30.0, gt=0, description="Wall clock for one correctness or race-check process.")
    memory_mb: int = Field(4096, ge=64, description="Address-space limit for candidate processes.")
    keep_workdirs: bool = Field(False, description="Keep build/run directories after evaluation (debugging).")


class SearchConfig(_Config):
    """Which search strategy runs, and its budget."""

    type: Literal["greedy", "best-of-n", "beam", "tree", "evolve"] = Field("greedy", description="Search strategy.")
    max_candidates: int = Field(20, ge=1, description="Evaluations allowed (the baseline check is free).")
    max_wall_s: float | None = Field(None, gt=0, description="Stop starting new evaluations after this many seconds.")
    batch: int = Field(4, ge=1, description="Candidates proposed per step (greedy) or in total per round (best-of-n).")
    patience: int = Field(3, ge=1, description="Greedy: steps without a new best before stopping early.")
    seed: int = Field(0, description="Seed for any randomness in proposal order.")
    beam_width: int = Field(2, ge=1, description="Beam: parents kept per round.")
    islands: int = Field(2, ge=1, description="Evolve: separate populations (migrating their best now and then).")
    population: int = Field(6, ge=2, description="Evolve: candidates kept per island.")
    value: Literal["none", "llm", "learned"] = Field("none", description="Reward-to-go model that reranks or prunes proposals.")
    value_path: Path | None = Field(None, description="The model `kernopt rtg train` wrote (for value = learned).")
    keep: int | None = Field(None, ge=1, description="Proposals that survive the value model per step (None = all, reranked).")


class ModelConfig(_Config):
    """The language model behind the llm policy, critic and judge (any provider litellm reaches)."""

    name: str = Field("openai/gpt-4o-mini", description="provider/model, as litellm names it (ollama/..., hosted_vllm/..., openai/...).")
    api_base: str | None = Field(None, description="Endpoint of a local or self-hosted server (vLLM, Ollama, any OpenAI-compatible).")
    api_key_env: str | None = Field(None, description="Environment variable holding the key (default: the provider's usual one).")
    temperature: float = Field(0.7, ge=0, le=2)
    max_tokens: int = Field(4096, ge=16, description="Longest answer asked for.")
    timeout_s: float = Field(120.0, gt=0, description="One request's wall clock.")
    max_retries: int = Field(4, ge=0, description="Retries for rate limits (Retry-After honoured), 5xx and timeouts.")
    max_usd: float | None = Field(None, gt=0, description="Stop the run (keeping its best) when model spend reaches this.")
    max_tokens_total: int | None = Field(None, gt=0, description="Stop the run when prompt+completion tokens reach this.")
    cache: bool = Field(True, description="Answer repeated requests from the run's disk cache (resume never pays twice).")


class RunConfig(_Config):
    """Everything `kernopt optimize` needs; saved resolved as the run's config.json."""

    task: str = Field(description="Path of the task directory.")
    policy: Literal["tuner", "llm"] = Field("tuner", description="Who proposes candidates: the offline tuner, or the LLM agent.")
    model: ModelConfig = ModelConfig()
    hybrid: bool = Field(False, description="llm policy: also let the offline tuner tune the knobs of the best LLM candidate.")
    sandbox: Literal["auto", "docker", "local"] = Field(
        "auto", description="Where candidates run: docker (a fresh container per candidate evaluation), local (process isolation), "
        "auto (docker when an engine answers, else an error; never a silent fallback to local).")
    search: SearchConfig = SearchConfig()
    eval: EvalConfig = EvalConfig()
    runs_dir: Path = Field(Path("runs"), description="Where run directories are created.")


def _parse_file(path: Path) -> dict[str, Any]:
    """A YAML or TOML config file as a mapping (one-line UserError when it is not one)."""
    try:
        text = path.read_text()
    except OSError as e:
        raise UserError(f"config {path}: cannot read: {e.strerror or e}") from None
    try:
        if path.suffix == ".toml":
            data = tomllib.loads(text)
        else:
            data = yaml.safe_load(text) or {}
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as e:
        raise UserError(f"config {path}: not valid {'TOML' if path.suffix == '.toml' else 'YAML'}: {str(e).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise UserError(f"config {path}: expected a mapping of settings at the top level")
    return data


def _put(data: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    node = data
    for key in parents:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise UserError(f"{dotted}: {key} is a value, not a section")
        node = child
    node[last] = value


def _merge(into: dict[str, Any], data: dict[str, Any]) -> None:
    for key, value in data.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def resolve_run_config(file: Path | None = None, flags: dict[str, Any] | None = None, sets: list[str] | None = None,
                       base: dict[str, Any] | None = None) -> RunConfig:
    """Defaults (or `base`, a saved config), then the config file (YAML or TOML), then the command-line flags
    given (dotted keys; None = not given), then `--set key.path=value` overrides (values parsed as YAML scalars)."""
    data: dict[str, Any] = json.loads(json.dumps(base)) if base is not None else {}
    if file is not None:
        _merge(data, _parse_file(file))
    for key, value in (flags or {}).items():
        if value is not None:
            _put(data, key, value)
    for item in sets or []:
        key, eq, raw = item.partition("=")
        if not eq or not key.strip():
            raise UserError(f"--set {item!r}: expected key.path=value (e.g. search.beam_width=3)")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        _put(data, key.strip(), value)
    try:
        return RunConfig.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "config"
        got = f" (got {err['input']!r})" if err.get("type") != "missing" and "input" in err else ""
        raise UserError(f"{where}: {err['msg']}{got}") from None


# What `--resume` may change: the limits, so a run (even a finished one) can be extended.
RESUME_LIMITS = {"search.max_candidates": "--budget", "search.max_wall_s": "--max-wall", "model.max_usd": "--max-usd",
                 "model.max_tokens_total": "--max-tokens"}


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(data, dict):
        return {prefix: data}
    out: dict[str, Any] = {}
    for key, value in data.items():
        out.update(_flat(value, f"{prefix}.{key}" if prefix else key))
    return out


def resume_config(stored: RunConfig, file: Path | None = None, flags: dict[str, Any] | None = None,
                  sets: list[str] | None = None) -> tuple[RunConfig, dict[str, tuple[Any, Any]]]:
    """The run's saved config with what was given alongside `--resume` applied, and the settings that changed
    ({dotted key: (old, new)}). Only the limits (RESUME_LIMITS) may change: any other setting given that
    differs from the run's is a one-line UserError naming it (given the same, it is accepted)."""
    base = json.loads(stored.model_dump_json())
    new = resolve_run_config(file, flags, sets, base=base)
    old_flat, new_flat = _flat(base), _flat(json.loads(new.model_dump_json()))
    changed = {k: (old_flat.get(k), new_flat.get(k)) for k in sorted(set(old_flat) | set(new_flat)) if old_flat.get(k) != new_flat.get(k)}
    refused = [k for k in changed if k not in RESUME_LIMITS]
    if refused:
        k = refused[0]
        raise UserError(f"--resume continues a run with its own settings: {k} is {changed[k][0]!r} in the run, {changed[k][1]!r} "
                        f"given; only {', '.join(RESUME_LIMITS.values())} can change on resume (start a new run for the rest)")
    return new, changed
