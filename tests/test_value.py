"""Reward-to-go models: the LLM judge (a fake model behind the real prompt), the learned model (trained
on synthetic run directories written by RunStore), and how a search uses them."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

from kernopt.agent.base import SearchState
from kernopt.agent.search import Hooks, get_search
from kernopt.agent.value import (
    LearnedValue,
    LLMJudge,
    features,
    format_report,
    get_value_model,
    parse_scores,
    train,
    transitions,
)
from kernopt.candidate import Candidate
from kernopt.config import RunConfig, SearchConfig
from kernopt.errors import UserError
from kernopt.evaluators.result import EvalResult
from kernopt.model import Completion, Spend
from kernopt.runs import RunStore
from kernopt.task import load_task
from tests.conftest import SMALL_GEMM
from tests.test_search import verdict


def gemm_state() -> SearchState:
    task = load_task(SMALL_GEMM)
    base = Candidate(files={task.kernel: task.baseline_source()}, author="baseline", idea="the task's own kernel")
    return SearchState(task=task, baseline=base, parent=base)


def child(parent: Candidate, idea: str, extra: str = "", **knobs: Any) -> Candidate:
    kernel = next(iter(parent.files))
    return parent.model_copy(update={"files": {kernel: parent.files[kernel] + extra}, "parent": parent.id, "idea": idea,
                                     "author": "tuner", **knobs}, deep=True)


# ---------------------------------------------------------------- the judge


class FakeModel:
    name = "fake/judge"
    spend = Spend()

    def __init__(self, reply: str | None = None) -> None:
        self.reply = reply
        self.calls: list[tuple[list[dict[str, str]], str]] = []

    def complete(self, messages: list[dict[str, str]], *, role: str, **opts: Any) -> Completion:
        self.calls.append((messages, role))
        return Completion(text=self.reply if self.reply is not None else "", model=self.name)


def test_parse_scores_reads_the_templates_answer_and_plain_lists() -> None:
    ids = ["a1", "b2", "c3"]
    answer = 'Sure.\n```json\n{"scores": [{"id": "b2", "score": 9, "reason": "x"}, {"id": "a1", "score": 2.5}]}\n```'
    assert parse_scores(answer, ids) == [2.5, 9.0, 5.0]  # c3 left out: neutral
    assert parse_scores("[1, 2, 30]", ids) == [1.0, 2.0, 10.0]  # clamped to 0..10
    assert parse_scores('scores: [3, "7", null] as asked', ids) == [3.0, 7.0, 5.0]
    assert parse_scores('{"scores": [{"id": "a1", "score": "high"}, {"id": "b2", "score": -4}]}', ids) == [5.0, 0.0, 5.0]


@pytest.mark.parametrize("garbage", ["", "I cannot judge these.", "[1, 2]", '{"scores": [{"id": "zz", "score": 3}]}',
                                     '{"scores": [{"id": "a1", "score": 9', "```json\n[1, 2, 3\n```", "{}", "[[1], [2], [3]]"])
def test_parse_scores_gives_up_on_garbage(garbage: str) -> None:
    assert parse_scores(garbage, ["a1", "b2", "c3"]) is None


def test_llm_judge_scores_proposals_through_the_judge_prompt() -> None:
    state = gemm_state()
    props = [child(state.baseline, "add `#pragma omp parallel for` on the i loop", "\n/* p */"),
             child(state.baseline, "compile with -funroll-loops", cflags=["-funroll-loops"])]
    model = FakeModel(json.dumps({"scores": [{"id": props[1].id, "score": 3}, {"id": props[0].id, "score": 8}]}))
    assert LLMJudge(model).score(state, props) == [8.0, 3.0]
    (messages, role), = model.calls
    prompt = messages[-1]["content"]
    assert role == "judge" and props[0].id in prompt and props[1].id in prompt and "parallel for" in prompt
    assert "+/* p */" in prompt  # the kernel diff of the first proposal
    assert "-funroll-loops" in prompt  # the knobs of the second


@pytest.mark.parametrize("reply", ["", "no idea", '{"scores": "lots"}', "```json\n{\"scores\": [{\"id\": 1, \"score\"```"])
def test_llm_judge_survives_garbage_with_neutral_scores(reply: str) -> None:
    state = gemm_state()
    logged: list[str] = []
    state.log = lambda t, **f: logged.append(t)
    props = [child(state.baseline, "a", "\n"), child(state.baseline, "b", "\n\n")]
    assert LLMJudge(FakeModel(reply)).score(state, props) == [LLMJudge.NEUTRAL] * 2
    assert logged == ["judge_unreadable"]


def test_llm_judge_reranks_a_search_and_the_scores_are_logged() -> None:
    state = gemm_state()
    events: list[tuple[str, dict[str, Any]]] = []
    state.log = lambda t, **f: events.append((t, f))

    class Policy:
        name = "two"

        def propose(self, s: SearchState, n: int) -> list[Candidate]:
            return [c for c in (child(s.parent, "first", "\n"), child(s.parent, "second", "\n\n")) if c.id not in s.seen][:n]

    props = Policy().propose(state, 2)
    model = FakeModel(json.dumps({"scores": [{"id": props[0].id, "score": 1}, {"id": props[1].id, "score": 9}]}))
    search = get_search(SearchConfig(type="greedy", max_candidates=1, batch=2, keep=1, value="llm"), Policy(),
                        lambda c, _best: (verdict(c, 1.5), False), Hooks(), get_value_model(SearchConfig(value="llm"), model))
    best = search.run(state)
    assert best is not None and best[0].idea == "second"  # the judge's favourite went first, the other was pruned
    assert events[0] == ("value", {"model": "llm", "scores": {props[0].id: 1.0, props[1].id: 9.0}, "kept": [props[1].id]})


def test_get_value_model_by_name(tmp_path: Path) -> None:
    assert get_value_model(SearchConfig(), None) is None
    assert isinstance(get_value_model(SearchConfig(value="llm"), FakeModel()), LLMJudge)
    with pytest.raises(UserError, match="needs a model"):
        get_value_model(SearchConfig(value="llm"), None)
    with pytest.raises(UserError, match="rtg train"):
        get_value_model(SearchConfig(value="learned"), None)
    (tmp_path / "bad.json").write_text('{"features": ["depth"]}')
    with pytest.raises(UserError, match="not a reward-to-go model"):
        get_value_model(SearchConfig(value="learned", value_path=tmp_path / "bad.json"), None)


# ---------------------------------------------------------------- training

# Synthetic world: an idea's effect on log-speedup; "unroll" usually breaks the build.
EFFECT = {"parallelize the outer loop": 0.30, "vectorize with simd": 0.08, "tile for the cache": 0.15,
          "unroll the inner loop": -0.10, "reorder the loops": 0.0}


def synthetic_run(runs_dir: Path, seed: int, n: int = 40, flat: bool = False) -> Path:
    """A run directory written by RunStore: a random tree grown from the small gemm baseline."""
    rng = random.Random(seed)
    store = RunStore.create(RunConfig(task=str(SMALL_GEMM), runs_dir=runs_dir), f"syn{seed}")
    task = load_task(SMALL_GEMM)
    base = Candidate(files={task.kernel: task.baseline_source()}, author="baseline")
    nodes: list[tuple[Candidate, float]] = [(base, 0.0)]
    for i in range(n):
        parent, parent_reward = rng.choice(nodes)
        idea = rng.choice(sorted(EFFECT))
        c = child(parent, idea, f"\n/* step {i} */\n" + "x" * rng.randrange(40))
        if flat:
            result = verdict(c, None)
        elif idea.startswith("unroll") and rng.random() < 0.7:
            result = EvalResult(candidate_id=c.id, status="compile_error", reason="synthetic")
        else:
            reward = parent_reward + EFFECT[idea] + rng.gauss(0, 0.02)
            result = verdict(c, math.exp(reward), significant=reward > 0)
            nodes.append((c, reward))
        store.record_eval(c, result)
    store.close()
    return store.root


def test_rtg_is_the_best_reward_over_the_candidate_and_its_descendants(tmp_path: Path) -> None:
    store = RunStore.create(RunConfig(task=str(SMALL_GEMM), runs_dir=tmp_path), "tiny")
    task = load_task(SMALL_GEMM)
    base = Candidate(files={task.kernel: task.baseline_source()}, author="baseline")
    a = child(base, "parallelize the outer loop", "\n" + "a" * 100)
    b = child(a, "tile for the cache", "b")
    c = child(a, "unroll the inner loop", "c", cflags=["-funroll-loops"])
    d = child(base, "reorder the loops", "d")
    for cand, result in [(a, verdict(a, 1.1)), (b, verdict(b, 1.5)), (c, verdict(c, None)), (d, verdict(d, 1.05)),
                         (child(d, "x", "y"), EvalResult(candidate_id="x", status="infra_error"))]:
        store.record_eval(cand, result)
    got = transitions(store.root)
    assert len(got) == 4  # the infra error is not a transition
    (fa, ya), (fb, yb), (fc, yc), (fd, yd) = got
    assert ya == pytest.approx(math.log(1.5)) and yb == pytest.approx(math.log(1.5))  # a leads to b
    assert yc == -1.5 and yd == pytest.approx(math.log(1.05))  # a wrong answer; d's infra-error child does not count
    assert fa["depth"] == 1 and fb["depth"] == 2 and fb["parent_reward"] == pytest.approx(math.log(1.1))
    assert fa["code_len_delta"] == pytest.approx(101 / len(base.files[task.kernel]))  # against the task's baseline
    assert fc["cflags_changed"] == 1 and fc["cflag:-funroll-loops"] == 1 and fa["idea:parallelize"] == 1
    assert fa["author:tuner"] == 1 and fa["parent_failed"] == 0


def test_train_fits_and_reports_a_held_out_rank_correlation(tmp_path: Path) -> None:
    runs = [synthetic_run(tmp_path / "runs", seed) for seed in range(5)]
    out = tmp_path / "rtg.json"
    report = train(runs, out, seed=0)
    assert report.runs == 5 and report.transitions == 200 and report.n_train + report.n_test == 200
    assert report.n_test == 40 and report.split.startswith("by run: 1 of 5")  # one run held out whole
    assert report.spearman > 0.5 and report.spearman_p < 0.01
    text = format_report(report)
    assert f"held-out Spearman rank correlation: {report.spearman:.3f}" in text and str(out) in text
    saved = json.loads(out.read_text())
    assert len(saved["features"]) == len(saved["weights"]) == report.features and saved["n_test"] == 40
    assert "idea:parallelize" in saved["features"] and "rtg(c)" in saved["target"]
    assert train(runs, tmp_path / "again.json", seed=0) == report.model_copy(update={"out": str(tmp_path / "again.json")})

    # the loaded model scores proposals: parallelizing beats unrolling, as in the world it learned from
    value = get_value_model(SearchConfig(value="learned", value_path=out), None)
    assert isinstance(value, LearnedValue)
    state = gemm_state()
    props = [child(state.baseline, "unroll the inner loop", "\n"), child(state.baseline, "parallelize the outer loop", "\n\n")]
    unroll, parallel = value.score(state, props)
    assert parallel > unroll + 0.1

    # and reranks a search with it: keep=1 evaluates only the proposal it rates highest
    class Policy:
        name = "two"

        def propose(self, s: SearchState, n: int) -> list[Candidate]:
            return [c for c in props if c.id not in s.seen][:n]

    evaluated: list[str] = []

    def evaluate(c: Candidate, best: object = None) -> tuple[EvalResult, bool]:
        evaluated.append(c.idea)
        return verdict(c, 1.2), False

    search = get_search(SearchConfig(type="greedy", max_candidates=1, keep=1), Policy(), evaluate, Hooks(), value)
    search.run(state)
    assert evaluated == ["parallelize the outer loop"]


def test_train_with_few_runs_splits_transitions_at_random(tmp_path: Path) -> None:
    runs = [synthetic_run(tmp_path / "runs", seed, n=30) for seed in range(2)]
    report = train(runs, tmp_path / "m.json", seed=3)
    assert report.split.startswith("random: 15 of 60") and report.n_test == 15 and report.n_train == 45
    assert not math.isnan(report.spearman)


def test_constant_held_out_rewards_give_an_undefined_correlation(tmp_path: Path) -> None:
    runs = [synthetic_run(tmp_path / "runs", seed, n=8, flat=True) for seed in range(3)]
    report = train(runs, tmp_path / "m.json")
    assert math.isnan(report.spearman) and report.n_test == 8
    assert "undefined (the held-out rewards-to-go (or predictions) are all equal)" in format_report(report)
    assert json.loads((tmp_path / "m.json").read_text())["spearman"] is None


def test_train_leaves_one_task_out(tmp_path: Path) -> None:
    runs = []
    for seed in range(6):  # three tasks, two runs each: the start event names the task
        root = synthetic_run(tmp_path / "runs", seed, n=20)
        RunStore(root).append("start", task=f"task{seed % 3}")
        runs.append(root)
    report = train(runs, tmp_path / "m.json", split="task")
    assert report.split.startswith("by task: each of 3 tasks") and sorted(report.per_task) == ["task0", "task1", "task2"]
    assert report.n_test == report.transitions == 120
    assert all(v > 0.5 for v in report.per_task.values()) and report.spearman > 0.5  # one world: it generalizes
    assert "within each held-out task: median" in format_report(report)
    assert json.loads((tmp_path / "m.json").read_text())["split"] == "task"
    with pytest.raises(UserError, match="at least 2 tasks"):
        train(runs[:1] + runs[3:4], tmp_path / "one.json", split="task")  # task0 twice
    with pytest.raises(UserError, match="unknown split"):
        train(runs, tmp_path / "x.json", split="seed")


def test_train_refuses_what_it_cannot_use(tmp_path: Path) -> None:
    empty = RunStore.create(RunConfig(task=str(SMALL_GEMM), runs_dir=tmp_path), "empty").root
    with pytest.raises(UserError, match="at least 2 evaluated candidates"):
        train([empty], tmp_path / "m.json")
    with pytest.raises(UserError, match="no run"):
        train([tmp_path / "missing"], tmp_path / "m.json")


def test_features_are_deterministic_and_read_the_parent() -> None:
    state = gemm_state()
    c = child(state.baseline, "Add SIMD to the j loop", "\n#pragma omp simd\n", threads=2)
    f = features(c, state.baseline, None, 1)
    assert f == features(c, state.baseline, None, 1)
    assert f["idea:simd"] == 1 and "idea:add" not in f and f["pragma_delta"] == 1 and f["threads_changed"] == 1
    assert f["threads"] == 2 and f["parent_reward"] == 0 and f["depth"] == 1
    failed = EvalResult(candidate_id=state.baseline.id, status="compile_error")
    g = features(c, None, failed, 3)
    assert g["parent_failed"] == 1 and g["parent_reward"] == -1.0 and "code_len_delta" not in g
