"""What the review commands read from a run directory: candidates in log order with their results,
critiques and re-measurements, the baseline, the best, the lineage; id resolution and diffs.

Everything here is read-only and tolerant of incomplete runs (no summary.json, a torn last line).
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernopt.candidate import Candidate
from kernopt.errors import UserError
from kernopt.evaluators.result import EvalResult
from kernopt.runs import RunStore


@dataclass
class Node:
    """One candidate of the run (the baseline included, as index 0 with no result)."""

    candidate: Candidate
    result: EvalResult | None  # None: the baseline (never evaluated as a candidate)
    index: int  # evaluation order, 1-based; 0 for the baseline
    id: str  # the candidate's content hash (for a baseline whose source is lost: the id the run's candidates name)
    critiques: list[dict[str, Any]] = field(default_factory=list)
    proposal: dict[str, Any] | None = None  # the executor's "proposal" event (llm policy)
    value_score: float | None = None
    remeasure: EvalResult | None = None

    @property
    def is_baseline(self) -> bool:
        return self.index == 0


@dataclass
class RunData:
    store: RunStore
    config: dict[str, Any]
    meta: dict[str, Any]
    summary: dict[str, Any] | None
    baseline: Node
    baseline_note: str  # why the baseline's source is missing or may differ ("" when it is the run's own)
    nodes: list[Node]  # evaluated candidates, in log order
    best_id: str | None  # the run's best (significant) candidate, None when the baseline was kept
    spend: dict[str, Any] | None

    @property
    def by_id(self) -> dict[str, Node]:
        return {self.baseline.id: self.baseline, **{n.id: n for n in self.nodes}}

    def parent_of(self, node: Node) -> Node | None:
        """The node's parent in this run (None for the baseline, or a parent the run does not hold)."""
        if node.is_baseline:
            return None
        return self.by_id.get(node.candidate.parent or "")

    def best_path(self) -> list[str]:
        """Ids from the baseline to the best candidate (empty when the baseline was kept)."""
        if self.best_id is None:
            return []
        by_id, path, cur = self.by_id, [], self.best_id
        while cur and cur in by_id and cur not in path:
            path.append(cur)
            cur = by_id[cur].candidate.parent or ""
        if self.baseline.id not in path:
            path.append(self.baseline.id)
        return path[::-1]


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, json.JSONDecodeError):
        return {}


def load_run(store: RunStore) -> RunData:
    """The run as the report and `runs diff` see it."""
    events = store.events()
    config = _read_json(store.root / "config.json")
    summary = store.summary()
    nodes: dict[str, Node] = {}
    critiques: dict[str, list[dict[str, Any]]] = {}
    proposals: dict[str, dict[str, Any]] = {}
    scores: dict[str, float] = {}
    remeasures: dict[str, EvalResult] = {}
    baseline: Candidate | None = None
    for ev in events:
        kind = ev.get("type")
        try:
            if kind == "eval":
                c = Candidate.model_validate(ev["candidate"])
                if c.id not in nodes:
                    nodes[c.id] = Node(c, EvalResult.model_validate(ev["result"]), len(nodes) + 1, c.id)
            elif kind in ("start", "resume") and baseline is None and isinstance(ev.get("baseline"), dict):
                baseline = Candidate.model_validate(ev["baseline"])
            elif kind == "critique" and isinstance(ev.get("critique"), dict):
                critiques.setdefault(str(ev.get("candidate_id")), []).append({**ev["critique"], "fallback": bool(ev.get("fallback"))})
            elif kind == "proposal":
                proposals[str(ev.get("candidate_id"))] = ev
            elif kind == "value" and isinstance(ev.get("scores"), dict):
                scores.update({str(k): float(v) for k, v in ev["scores"].items() if isinstance(v, int | float)})
            elif kind == "remeasure":
                r = EvalResult.model_validate(ev["result"])
                remeasures[r.candidate_id] = r
        except (KeyError, TypeError, ValueError):
            continue  # an event of an older or foreign format: the report shows what it can
    for cid, node in nodes.items():
        node.critiques = critiques.get(cid, [])
        node.proposal = proposals.get(cid)
        node.value_score = scores.get(cid)
        node.remeasure = remeasures.get(cid)

    baseline, base_id, note = _baseline(config, baseline, list(nodes.values()))
    base_node = Node(baseline, None, 0, base_id, critiques=critiques.get(base_id, []))

    best_id: str | None = None
    if summary is not None and summary.get("status") == "finished":
        best = summary.get("best_candidate")
        best_id = best if isinstance(best, str) and best in nodes else None
    else:  # unfinished: the fastest candidate so far that was verified and significantly faster
        faster = [n for n in nodes.values() if n.result is not None and n.result.faster]
        if faster:
            best_id = max(faster, key=lambda n: (n.result.speedup if n.result else None) or 0.0).id
    spend = summary.get("spend") if summary else None
    if spend is None and config.get("policy") == "llm":
        spend = store.spend().model_dump()
    return RunData(store=store, config=config, meta=_read_json(store.root / "meta.json"), summary=summary, baseline=base_node,
                   baseline_note=note, nodes=list(nodes.values()), best_id=best_id, spend=spend)


def _baseline(config: dict[str, Any], logged: Candidate | None, nodes: list[Node]) -> tuple[Candidate, str, str]:
    """The run's baseline: as its log recorded it, else rebuilt from the task directory (runs logged
    before the log held it), checked against the parent id the run's first candidates name."""
    if logged is not None:
        return logged, logged.id, ""
    evaluated = {n.id for n in nodes}
    root_parents = {n.candidate.parent for n in nodes if n.candidate.parent and n.candidate.parent not in evaluated}
    try:
        from kernopt.optimize import baseline_candidate
        from kernopt.task import load_task

        rebuilt = baseline_candidate(load_task(Path(str(config.get("task", "")))))
    except Exception as e:  # noqa: BLE001 - a task that moved, changed format or fails to load: say so, go on
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        pid = sorted(root_parents)[0] if root_parents else "baseline"
        return (Candidate(files={}, author="baseline", idea="the task's own kernel (source not available)"), pid,
                f"the baseline's source is not in the run log and the task could not be read ({first})")
    if root_parents and rebuilt.id not in root_parents:
        pid = sorted(root_parents)[0]
        return rebuilt, pid, (f"the baseline was rebuilt from {config.get('task')}, which has changed since the run "
                              f"(its id is now {rebuilt.id}; the run's candidates name {', '.join(sorted(root_parents))})")
    return rebuilt, rebuilt.id, ""


# ------------------------------------------------------------------------------ ids and diffs
def resolve(run: RunData, ref: str) -> Node:
    """A candidate by id, unique id prefix, `baseline` or `best`. UserError (one line) otherwise."""
    ref = ref.strip()
    if not ref:
        raise UserError("give a candidate id (a unique prefix will do), baseline or best")
    if ref == "baseline":
        return run.baseline
    if ref == "best":
        return run.by_id[run.best_id] if run.best_id else run.baseline
    by_id = run.by_id
    if ref in by_id:
        return by_id[ref]
    matches = sorted(i for i in by_id if i.startswith(ref))
    if len(matches) == 1:
        return by_id[matches[0]]
    if len(matches) > 1:
        raise UserError(f"candidate id {ref!r} is ambiguous in run {run.store.run_id}: it starts {', '.join(matches[:8])}"
                        + (f" and {len(matches) - 8} more" if len(matches) > 8 else ""))
    ids = [n.id for n in run.nodes]
    close = difflib.get_close_matches(ref, ids, n=5, cutoff=0.4)
    hint = (f"; close: {', '.join(close)}" if close else f"; its ids: {', '.join(ids[:6])}{' ...' if len(ids) > 6 else ''}" if ids
            else "; it has no evaluated candidates")
    raise UserError(f"no candidate {ref!r} in run {run.store.run_id} (ids, unique prefixes, baseline or best{hint})")


def knob_lines(c: Candidate) -> list[str]:
    """The build and run knobs as lines, for diffs (empty when the candidate sets none)."""
    lines = [f"cflags: {' '.join(c.cflags)}"] if c.cflags else []
    lines += [f"-D{k}={v}" for k, v in sorted(c.defines.items())]
    lines += [f"{k}: {v}" for k, v in c.knobs().items() if k not in ("cflags", "defines") and v is not None]
    return lines


def candidate_diff(a: Candidate, b: Candidate, a_label: str = "a", b_label: str = "b", context: int = 3) -> str:
    """A unified diff of every file (and of the knobs, as a pseudo-file `knobs`); "" when identical."""
    parts: list[str] = []
    names = sorted(set(a.files) | set(b.files))
    pairs = [(name, a.files.get(name), b.files.get(name)) for name in names]
    pairs.append(("knobs", "\n".join(knob_lines(a)) or None, "\n".join(knob_lines(b)) or None))
    for name, old, new in pairs:
        if old == new:
            continue
        lines = difflib.unified_diff((old or "").splitlines(), (new or "").splitlines(),
                                     f"{a_label}/{name}" if old is not None else "/dev/null",
                                     f"{b_label}/{name}" if new is not None else "/dev/null", lineterm="", n=context)
        parts.append("\n".join(lines))
    return "\n".join(p for p in parts if p)
