"""Reward-to-go models (ValueModel): estimate how promising a proposal is before it costs an evaluation.

- `LLMJudge`: asks the model (prompt prompts/judge.j2) for a 0-10 score per proposal.
- `LearnedValue`: a ridge regression fit by `train` from the "eval" events of earlier runs.

Best reward-to-go (the training target): for a candidate c evaluated in a run,

    rtg(c) = max(reward(d) for d in {c} and all of c's descendants in that run)

with reward = log(speedup) when verified, the fixed penalty otherwise (EvalResult.reward); infra
errors (not the candidate's fault) are left out. It is absolute, not relative to the parent: the
search maximizes the best reward reached, and proposals of different parents are ranked together
(beam, tree); the parent's reward is a feature, so the model can still learn "improves on its
parent". Candidates late in a run had less budget left for descendants, so their rtg is censored
towards their own reward.
"""

from __future__ import annotations

import json
import math
import re
import warnings
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel

from kernopt.agent.base import SearchState, ValueModel
from kernopt.candidate import Candidate
from kernopt.config import SearchConfig
from kernopt.errors import UserError
from kernopt.evaluators.result import EvalResult
from kernopt.model import Model

if TYPE_CHECKING:
    from kernopt.runs import RunStore

RTG_DEFINITION = ("rtg(c) = max reward (log speedup if verified, else the failure penalty) over c and all its "
                  "descendants in the same run; infra errors left out")

# ------------------------------------------------------------------ the LLM judge


class LLMJudge:
    """Scores proposals with the judge prompt: 0 (will fail or be slower) .. 10 (a large gain), one
    call per parent. An answer that cannot be read gives every proposal the neutral score, so a bad
    answer never reorders proposals and never stops the run."""

    name = "llm"
    NEUTRAL = 5.0

    def __init__(self, model: Model) -> None:
        self.model = model

    def score(self, state: SearchState, candidates: list[Candidate]) -> list[float]:
        if not candidates:
            return []
        from kernopt.prompts import diff, outcome, render, shared

        parent, kernel = state.parent, state.task.kernel
        code = parent.files.get(kernel, "")
        critique = state.critiques.get(parent.id)
        parent_outcome = "the baseline (1.00x)" if parent.id == state.baseline.id else outcome(state.result_of(parent.id))
        prompt = render(
            "judge", **shared(state), code=code,
            parent={"id": parent.id, "idea": parent.idea or "the baseline", "outcome": parent_outcome,
                    "knobs": parent.knobs()},
            critique=critique.model_dump() if critique else None,
            proposals=[{"id": c.id, "idea": c.idea, "author": c.author, "knobs": c.knobs(),
                        "diff": diff(code, c.files.get(kernel, ""), kernel)} for c in candidates],
        )
        completion = self.model.complete([{"role": "user", "content": prompt}], role="judge")
        try:
            scores = parse_scores(completion.text, [c.id for c in candidates], self.NEUTRAL)
        except Exception:  # noqa: BLE001 - an untrusted answer that breaks the parser counts as unreadable
            scores = None
        if scores is None:
            state.log("judge_unreadable", parent=parent.id, text=completion.text[:500])
            return [self.NEUTRAL] * len(candidates)
        return scores


_FENCED = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def parse_scores(text: str, ids: list[str], neutral: float = LLMJudge.NEUTRAL) -> list[float] | None:
    """Scores in `ids` order from the judge's answer, clamped to 0..10; None when nothing readable.

    Accepted: {"scores": [{"id": ..., "score": ...}, ...]} (a proposal left out, or with a score that is
    not a number, gets `neutral`), or a plain list of len(ids) numbers, optionally inside ``` fences
    or prose."""
    for chunk in _json_chunks(text):
        try:
            data = json.loads(chunk)
        except (ValueError, RecursionError):
            continue
        if isinstance(data, dict):
            data = data.get("scores")
        if not isinstance(data, list) or not data:
            continue
        if all(isinstance(x, dict) for x in data):
            by_id = {str(x.get("id")): _number(x.get("score")) for x in data}
            if not any(i in by_id for i in ids):
                continue
            return [_clamp(by_id.get(i), neutral) for i in ids]
        numbers = [_number(x) for x in data]
        if len(data) == len(ids) and any(x is not None for x in numbers):
            return [_clamp(x, neutral) for x in numbers]
    return None


def _json_chunks(text: str) -> list[str]:
    chunks = [m.group(1) for m in _FENCED.finditer(text)] + [text]
    for open_, close in ("{}", "[]"):
        start, end = text.find(open_), text.rfind(close)
        if 0 <= start < end:
            chunks.append(text[start:end + 1])
    return chunks


def _number(x: Any) -> float | None:
    if isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError, OverflowError):
        return None
    return v if math.isfinite(v) else None


def _clamp(v: float | None, neutral: float) -> float:
    return neutral if v is None else min(10.0, max(0.0, v))


# ------------------------------------------------------------------ features

NUMERIC = ["threads", "ranks", "threads_changed", "ranks_changed", "bind_changed", "cflags_changed", "defines_changed",
           "code_len_delta", "pragma_delta", "depth", "parent_reward", "parent_failed"]
_WORD = re.compile(r"[a-z][a-z0-9_]{2,}")
_STOP = frozenset("the and add use with from into instead line for its this that".split())


def features(c: Candidate, parent: Candidate | None, parent_result: EvalResult | None, depth: int) -> dict[str, float]:
    """Deterministic features of one transition. `parent` None: unknown (its deltas read 0).
    Indicators are named kind:value (idea:<word>, cflag:<flag>, author:<name>)."""
    f: dict[str, float] = {"threads": float(c.threads or 0), "ranks": float(c.ranks or 0), "depth": float(depth),
                           "parent_reward": parent_result.reward if parent_result else 0.0,
                           "parent_failed": float(parent_result is not None and parent_result.status != "ok")}
    if parent is not None:
        code, pcode = "".join(c.files.values()), "".join(parent.files.values())
        f |= {"threads_changed": float(c.threads != parent.threads), "ranks_changed": float(c.ranks != parent.ranks),
              "bind_changed": float(c.bind != parent.bind), "cflags_changed": float(c.cflags != parent.cflags),
              "defines_changed": float(c.defines != parent.defines),
              "code_len_delta": (len(code) - len(pcode)) / max(len(pcode), 1),
              "pragma_delta": float(code.count("#pragma") - pcode.count("#pragma"))}
    for word in set(_WORD.findall(c.idea.lower())) - _STOP:
        f[f"idea:{word}"] = 1.0
    for flag in c.cflags:
        f[f"cflag:{flag}"] = 1.0
    f[f"author:{c.author or 'unknown'}"] = 1.0
    return f


def _lineage(c: Candidate, nodes: dict[str, Candidate], root: Candidate | None) -> tuple[Candidate | None, int]:
    """(parent or None when unknown, depth): the root's children have depth 1."""
    depth, node = 1, nodes.get(c.parent or "")
    while node is not None and depth < 1000:
        depth += 1
        node = nodes.get(node.parent or "")
    parent = nodes.get(c.parent or "")
    if parent is None and root is not None and c.parent == root.id:
        parent = root
    return parent, depth


# ------------------------------------------------------------------ the learned model


class LearnedValue:
    """A ridge regression on standardized `features`, predicting the best reward-to-go (log-speedup units)."""

    name = "learned"

    def __init__(self, names: list[str], weights: list[float], mean: list[float], std: list[float], intercept: float) -> None:
        self.names, self.intercept = names, intercept
        self.weights, self.mean, self.std = np.asarray(weights, float), np.asarray(mean, float), np.asarray(std, float)

    @classmethod
    def load(cls, path: Path) -> LearnedValue:
        try:
            d = json.loads(Path(path).read_text())
            model = cls(list(d["features"]), d["weights"], d["mean"], d["std"], float(d["intercept"]))
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise UserError(f"{path}: not a reward-to-go model written by `kernopt rtg train` ({e})") from None
        if not len(model.names) == len(model.weights) == len(model.mean) == len(model.std):
            raise UserError(f"{path}: feature, weight, mean and std lists differ in length")
        return model

    def to_json(self, **extra: Any) -> dict[str, Any]:
        return {"kind": "kernopt-rtg", "version": 1, "features": self.names, "weights": self.weights.tolist(),
                "mean": self.mean.tolist(), "std": self.std.tolist(), "intercept": self.intercept, **extra}

    def predict(self, rows: list[dict[str, float]]) -> np.ndarray:
        x = np.array([[row.get(n, 0.0) for n in self.names] for row in rows], float).reshape(len(rows), len(self.names))
        return self.intercept + ((x - self.mean) / self.std) @ self.weights

    def score(self, state: SearchState, candidates: list[Candidate]) -> list[float]:
        nodes = {c.id: c for c, _ in state.history}
        rows = []
        for c in candidates:
            parent, depth = _lineage(c, nodes, state.baseline)
            result = state.result_of(parent.id) if parent is not None and parent.id != state.baseline.id else None
            rows.append(features(c, parent, result, depth))
        return [float(v) for v in self.predict(rows)]


def get_value_model(config: SearchConfig, model: Model | None) -> ValueModel | None:
    """The value model config.value names: None for "none"; "llm" needs `model`; "learned" loads value_path."""
    if config.value == "llm":
        if model is None:
            raise UserError("--value llm needs a model: pass --model (and --api-base for a local server)")
        return LLMJudge(model)
    if config.value == "learned":
        if config.value_path is None:
            raise UserError("--value learned needs the model file `kernopt rtg train` wrote (search.value_path)")
        return LearnedValue.load(config.value_path)
    return None


# ------------------------------------------------------------------ training


class TrainReport(BaseModel):
    """What `train` fit and how well it ranks held-out transitions."""

    runs: int
    transitions: int
    n_train: int
    n_test: int
    split: str
    spearman: float  # held out; NaN when undefined (too few held out, or all their rewards-to-go equal)
    spearman_p: float
    train_spearman: float
    features: int
    out: str
    # split "task": each task's transitions ranked by the model fit on the other tasks' runs (NaN where undefined)
    per_task: dict[str, float] = {}


RIDGE = 1.0
MIN_COUNT = 2  # an indicator seen in fewer training transitions is not a feature
MAX_INDICATORS = 200
SPLITS = ("run", "task")


def transitions(run_dir: Path) -> list[tuple[dict[str, float], float]]:
    """(features, rtg) for every evaluated candidate of one run (infra errors left out)."""
    from kernopt.runs import RunStore

    store = RunStore.open(run_dir)
    done: dict[str, tuple[Candidate, EvalResult]] = {}
    for ev in store.events():
        if ev.get("type") == "eval":
            try:
                c = Candidate.model_validate(ev["candidate"])
                done[c.id] = (c, EvalResult.model_validate(ev["result"]))
            except (KeyError, ValueError):
                continue
    done = {i: cr for i, cr in done.items() if cr[1].status != "infra_error"}
    nodes = {i: c for i, (c, _) in done.items()}
    children: dict[str, list[str]] = {}
    for i, c in nodes.items():
        children.setdefault(c.parent or "", []).append(i)
    rtg: dict[str, float] = {}
    for i in sorted(nodes, key=lambda i: -_lineage(nodes[i], nodes, None)[1]):  # deepest first: children are done
        rtg[i] = max([done[i][1].reward, *(rtg[k] for k in children.get(i, []) if k in rtg)])
    root = _baseline_of(store)
    out = []
    for i, (c, _) in done.items():
        parent, depth = _lineage(c, nodes, root)
        parent_result = done[parent.id][1] if parent is not None and parent.id in done else None
        out.append((features(c, parent, parent_result, depth), rtg[i]))
    return out


def task_of(run_dir: Path) -> str:
    """The name of the task a run optimized: its start event's, else its task directory's name."""
    from kernopt.runs import RunStore

    store = RunStore.open(run_dir)
    for ev in store.events():
        if ev.get("type") == "start" and isinstance(ev.get("task"), str):
            return str(ev["task"])
    return Path(store.config().task).name


def _baseline_of(store: RunStore) -> Candidate | None:
    """The run's baseline candidate rebuilt from its task (used when its id matches a parent id), if the task loads."""
    from kernopt.task import load_task

    try:
        task = load_task(store.config().task)
        return Candidate(files={task.kernel: task.baseline_source()})
    except (UserError, OSError, ValueError):
        return None


Row = tuple[int, dict[str, float], float]  # (run index, features, rtg)


def fit(rows: list[Row]) -> LearnedValue:
    """The ridge regression on `rows`: indicators seen at least MIN_COUNT times (the MAX_INDICATORS most
    frequent), then every feature standardized."""
    counts = Counter(name for _, f, _ in rows for name in f if ":" in name)
    indicators = sorted((n for n, k in counts.items() if k >= MIN_COUNT), key=lambda n: (-counts[n], n))[:MAX_INDICATORS]
    names = NUMERIC + sorted(indicators)
    x = np.array([[f.get(n, 0.0) for n in names] for _, f, _ in rows], float)
    y = np.array([y for _, _, y in rows], float)
    mean, std = x.mean(axis=0), x.std(axis=0)
    std[std == 0] = 1.0
    xs = (x - mean) / std
    weights = np.linalg.solve(xs.T @ xs + RIDGE * np.eye(len(names)), xs.T @ (y - y.mean()))
    return LearnedValue(names, weights.tolist(), mean.tolist(), std.tolist(), float(y.mean()))


def train(run_dirs: list[Path], out: Path, seed: int = 0, test_fraction: float = 0.25, split: str = "run") -> TrainReport:
    """Fit a LearnedValue on the runs' transitions and write it to `out` (JSON).

    split "run": with 3 or more runs, a `test_fraction` of the runs (chosen with `seed`) is held out, so
    no run is on both sides; with fewer, a random `test_fraction` of the transitions. The model written
    is the one fit on the training part, i.e. the one the reported held-out correlation describes.

    split "task" (leave one task out): for every task, a model fit on the other tasks' runs ranks that
    task's transitions; `per_task` has each task's Spearman and `spearman` is over all of them pooled.
    This is what a model meets on a task it has never seen. The model written is fit on every run."""
    if split not in SPLITS:
        raise UserError(f"unknown split {split!r}: use one of {', '.join(SPLITS)}")
    per_run = [(d, t) for d, t in ((Path(d), transitions(Path(d))) for d in run_dirs) if t]
    rows: list[Row] = [(r, f, y) for r, (_, ts) in enumerate(per_run) for f, y in ts]
    if len(rows) < 2:
        raise UserError(f"need at least 2 evaluated candidates to train on; found {len(rows)} in {len(run_dirs)} run(s)")
    per_task: dict[str, float] = {}
    if split == "task":
        tasks = [task_of(d) for d, _ in per_run]
        if len(set(tasks)) < 2:
            raise UserError(f"leave-one-task-out needs runs of at least 2 tasks; these {len(per_run)} are all of {tasks[0]}")
        preds: list[float] = []
        ys: list[float] = []
        for name in sorted(set(tasks)):
            held = [row for row in rows if tasks[row[0]] == name]
            rest = [row for row in rows if tasks[row[0]] != name]
            p = fit(rest).predict([f for _, f, _ in held])
            y_held = np.array([y for _, _, y in held], float)
            per_task[name] = _spearman(p, y_held)[0]
            preds += p.tolist()
            ys += y_held.tolist()
        model = fit(rows)
        rho, pval = _spearman(np.array(preds), np.array(ys))
        n_train, n_test = len(rows), len(rows)
        split_text = f"by task: each of {len(per_task)} tasks ranked by a model fit on the others' runs"
    else:
        rng = np.random.default_rng(seed)
        if len(per_run) >= 3:
            k = max(1, round(test_fraction * len(per_run)))
            held_runs = set(rng.permutation(len(per_run))[:k].tolist())
            test = [i for i, (r, _, _) in enumerate(rows) if r in held_runs]
            split_text = f"by run: {k} of {len(per_run)} runs held out (seed {seed})"
        else:
            k = min(len(rows) - 1, max(1, round(test_fraction * len(rows))))
            test = sorted(rng.permutation(len(rows))[:k].tolist())
            split_text = f"random: {k} of {len(rows)} transitions held out (seed {seed}; fewer than 3 runs)"
        test_set = set(test)
        train_rows = [rows[i] for i in range(len(rows)) if i not in test_set]
        test_rows = [rows[i] for i in test]
        model = fit(train_rows)
        rho, pval = _spearman(model.predict([f for _, f, _ in test_rows]), np.array([y for _, _, y in test_rows], float))
        n_train, n_test = len(train_rows), len(test_rows)
    fitted = rows if split == "task" else train_rows
    train_rho, _ = _spearman(model.predict([f for _, f, _ in fitted]), np.array([y for _, _, y in fitted], float))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(model.to_json(target=RTG_DEFINITION, ridge=RIDGE, split=split, n_train=n_train, n_test=n_test,
                                            spearman=None if math.isnan(rho) else rho), indent=2) + "\n")
    return TrainReport(runs=len(per_run), transitions=len(rows), n_train=n_train, n_test=n_test, split=split_text,
                       spearman=rho, spearman_p=pval, train_spearman=train_rho, features=len(model.names), out=str(out),
                       per_task=per_task)


def _spearman(pred: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Spearman's rho and its p-value; NaN when undefined (fewer than 2 points or a constant side)."""
    if len(y) < 2 or np.ptp(y) == 0 or np.ptp(pred) == 0:
        return math.nan, math.nan
    from scipy.stats import spearmanr

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = spearmanr(pred, y)
    return float(res.statistic), float(res.pvalue)


def format_report(report: TrainReport) -> str:
    """A few lines for the CLI."""
    if math.isnan(report.spearman):
        why = "fewer than 2 held out" if report.n_test < 2 else "the held-out rewards-to-go (or predictions) are all equal"
        held = f"held-out Spearman rank correlation: undefined ({why})"
    else:
        held = f"held-out Spearman rank correlation: {report.spearman:.3f} (p = {report.spearman_p:.2g}, n = {report.n_test})"
    train_rho = "undefined" if math.isnan(report.train_spearman) else f"{report.train_spearman:.3f}"
    lines = [f"trained on {report.n_train} of {report.transitions} transitions from {report.runs} run(s); split {report.split}",
             held]
    if report.per_task:
        defined = [v for v in report.per_task.values() if not math.isnan(v)]
        each = ", ".join(f"{t} {'-' if math.isnan(v) else f'{v:.2f}'}" for t, v in report.per_task.items())
        middle = f"median {float(np.median(defined)):.3f} over the {len(defined)} where defined" if defined else "undefined for every task"
        lines.append(f"within each held-out task: {middle} ({each})")
    lines.append(f"training Spearman {train_rho}; {report.features} features; model written to {report.out}")
    return "\n".join(lines)
