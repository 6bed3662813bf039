"""One run as HTML: the header, the progress plot, the lineage tree and a section per candidate.

`run_context` turns a RunData into plain values for the templates (which escape every string);
the only pre-rendered HTML it hands over is pygments output and the SVG from svg.py, both escaped
where they are made. Ids are prefixed with a namespace so several runs fit in one page (bench)."""

from __future__ import annotations

import math
from typing import Any

from markupsafe import Markup

from kernopt.agent.search import is_better
from kernopt.evaluators.result import EvalResult
from kernopt.report import svg
from kernopt.report.data import Node, RunData, candidate_diff, knob_lines
from kernopt.report.highlight import diff_html, source_html
from kernopt.runs import phase_summary
from kernopt.verdicts import explain, shown

LOG_CHARS = 20_000


def status_class(node: Node) -> str:
    """CSS status class: faster (verified and significantly faster), the status otherwise."""
    r = node.result
    if r is None:
        return "baseline"
    return "faster" if r.faster else r.status


def fmt_x(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.2f}×"


def fmt_s(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s * 1e3:.3f} ms" if s < 1 else f"{s:.3f} s"


def speedup_text(r: EvalResult | None) -> str:
    if r is None or r.timing is None:
        return ""
    t = r.timing
    vs = f"; {r.vs_best.describe()}" if r.vs_best is not None else ""
    return f"{fmt_s(t.candidate_median_s)}, {fmt_x(t.speedup)} [{t.ci_low:.2f}, {t.ci_high:.2f}]{vs}"


def short(cid: str) -> str:
    return cid[:8]


def node_label(node: Node) -> str:
    r = node.result
    if r is None:
        return "baseline"
    if r.status == "ok" and r.timing is not None:
        return f"{short(node.id)} {fmt_x(r.timing.speedup)}"
    return f"{short(node.id)} {r.status}"


def node_tip(node: Node) -> str:
    r = node.result
    if r is None:
        return f"baseline {node.id}: {node.candidate.idea or 'the task’s own kernel'}"
    text = speedup_text(r) if r.status == "ok" and r.timing else r.status
    return f"#{node.index} {node.id} — {text} — {node.candidate.idea}"[:400]


def run_context(run: RunData, ns: str = "") -> dict[str, Any]:
    """Everything the run templates show. `ns`: prefix for element ids (unique per run in a page)."""
    anchor = {n.id: f"{ns}c-{n.id}" for n in [run.baseline, *run.nodes]}
    path = set(run.best_path())
    summary = run.summary or {}
    meta, config = run.meta, run.config

    # progress plot: the speedup of the search's best after each evaluation (as the search measured it), the best
    # decided as the search decides it (is_better: paired timing against the best, not the larger speedup)
    best_so_far, best_pair = [1.0], None
    points = []
    for n in run.nodes:
        r = n.result
        assert r is not None
        if is_better(r, best_pair):
            best_pair = (n.candidate, r)
        best_so_far.append(best_pair[1].speedup or 1.0 if best_pair is not None else 1.0)
        timed = r.timing is not None and r.status == "ok"
        points.append(svg.Point(x=n.index, y=r.timing.speedup if timed and r.timing else None,
                                lo=r.timing.ci_low if timed and r.timing else None, hi=r.timing.ci_high if timed and r.timing else None,
                                cls=status_class(n), tip=node_tip(n), href=f"#{anchor[n.id]}"))
    plot = Markup(svg.progress_plot(points, best_so_far)) if run.nodes else None

    tree_nodes = [svg.TreeNode(id=n.id, label=node_label(n), cls=status_class(n), tip=node_tip(n), href=f"#{anchor[n.id]}",
                               parent=None if n.is_baseline else n.candidate.parent, best=n.id in path)
                  for n in [run.baseline, *run.nodes]]
    tree = Markup(svg.lineage_tree(tree_nodes))

    statuses: dict[str, int] = {}
    for n in run.nodes:
        statuses[status_class(n)] = statuses.get(status_class(n), 0) + 1

    model = config.get("model") or {}
    header = {
        "run_id": run.store.run_id, "task": summary.get("task") or config.get("task", "?"), "task_dir": config.get("task", ""),
        "target": summary.get("target", ""), "policy": config.get("policy", "?"),
        "model": model.get("name") if config.get("policy") == "llm" or (config.get("search") or {}).get("value") == "llm" else None,
        "search": (config.get("search") or {}).get("type", "?"), "budget": (config.get("search") or {}).get("max_candidates"),
        "sandbox": config.get("sandbox", "?"),
        "host": meta.get("host", "?"), "cpu": meta.get("cpu_model", ""), "cpus": meta.get("cpus"), "machine": meta.get("machine", ""),
        "created": meta.get("created", ""), "kernopt": meta.get("kernopt", ""),
        "finished": summary.get("status") == "finished", "stopped_by": summary.get("stopped_by"),
        "elapsed_s": summary.get("elapsed_s"), "note": summary.get("note"),
        "candidates": len(run.nodes), "statuses": sorted(statuses.items()), "best": None,
    }
    best_node = run.by_id.get(run.best_id) if run.best_id else None
    if best_node is not None:
        re = best_node.remeasure
        search = best_node.result
        if header["finished"]:  # the summary holds the re-measurement's verdict
            speed, ci, significant = summary.get("best_speedup"), summary.get("best_ci"), summary.get("best_significant")
        elif re is not None and re.timing is not None:  # killed after re-measuring, before the summary
            speed, ci, significant = re.timing.speedup, [re.timing.ci_low, re.timing.ci_high], re.faster
        else:  # so far: the search's own measurement, not yet confirmed
            t = search.timing if search else None
            speed, ci, significant = (t.speedup, [t.ci_low, t.ci_high], None) if t else (None, None, None)
        header["best"] = {
            "anchor": anchor[best_node.id], "id": best_node.id, "idea": best_node.candidate.idea,
            "speedup": speed, "ci": ci, "significant": significant, "remeasured": re is not None,
            "search_speedup": search.speedup if search else None,
            "vs_eager": summary.get("best_speedup_vs_eager"), "vs_compile": summary.get("best_speedup_vs_compile"),
            "device": summary.get("device"),
        }
    spend = run.spend
    header["spend"] = spend if spend and (spend.get("calls") or spend.get("usd")) else None

    # the legend: each status, race verdict, significance verdict and flag the run's candidates show, once
    words: dict[str, None] = {}
    for n in run.nodes:
        for r in (n.result, n.remeasure):
            if r is not None:
                words.update(dict.fromkeys(shown(r)))
    legend = [(w, explain(w)) for w in words if explain(w)]
    # where the candidates' time went, per phase (the summary's, or from the log for an unfinished run)
    phase_rows = summary.get("phases") or phase_summary([n.result for n in run.nodes if n.result is not None])
    grand = sum(p["total_s"] for p in phase_rows.values()) or 1.0
    phases = [{"name": k, "total": f"{p['total_s']:.1f}", "median": f"{p['median_s']:.2f}", "n": int(p["candidates"]),
               "pct": f"{100 * p['total_s'] / grand:.0f}"} for k, p in phase_rows.items()]
    return {"ns": ns, "header": header, "plot": plot, "tree": tree, "legend": legend, "phases": phases,
            "baseline_note": run.baseline_note,
            "candidates": [candidate_context(run, n, anchor, path, confirmed=not header["best"] or header["best"]["significant"] is not False)
                           for n in [run.baseline, *run.nodes]]}


def candidate_context(run: RunData, node: Node, anchor: dict[str, str], path: set[str], confirmed: bool = True) -> dict[str, Any]:
    """One candidate's section. `confirmed`: the run's best held up on re-measurement (or was not re-measured yet)."""
    c, r = node.candidate, node.result
    parent = run.parent_of(node)
    ctx: dict[str, Any] = {
        "anchor": anchor[node.id], "id": node.id, "short": short(node.id), "index": node.index, "baseline": node.is_baseline,
        "author": c.author, "idea": c.idea, "cls": status_class(node), "status": r.status if r else "baseline",
        "reason": r.reason if r else "", "best": node.id == run.best_id, "on_path": node.id in path,
        "best_label": "★ best" if confirmed else "★ search's best, not confirmed on re-measurement",
        "parent_id": c.parent, "parent_anchor": anchor.get(c.parent or ""),
        "knobs": knob_lines(c), "flags": list(r.flags) if r else [],
        "notes": {w: explain(w) for w in (shown(r) if r else [])},  # title attributes: each word's one-line meaning
        "sources": [{"name": name, "html": source_html(text, name), "lines": text.count("\n") + 1}
                    for name, text in sorted(c.files.items())],
        "critiques": node.critiques, "proposal": node.proposal, "value_score": node.value_score,
        # filled below where the candidate has them
        "diff": None, "diff_note": "", "diff_added": 0, "diff_removed": 0, "speedup": "", "timing": None, "remeasure": None,
        "verification": [], "race_detail": "", "phases": [], "phase_total": "", "resources": [], "log": "", "roofline": "",
        "compiler_report": "",
    }
    if node.is_baseline:
        pass
    elif parent is None:
        ctx["diff_note"] = f"its parent {c.parent or '(none)'} is not in this run"
    else:
        text = candidate_diff(parent.candidate, c, f"{short(parent.id)}" if not parent.is_baseline else "baseline", short(node.id))
        ctx["diff"] = diff_html(text) if text else None
        ctx["diff_note"] = "" if text else "identical to its parent"
        ctx["diff_added"] = sum(1 for ln in text.splitlines() if ln.startswith("+") and not ln.startswith("+++"))
        ctx["diff_removed"] = sum(1 for ln in text.splitlines() if ln.startswith("-") and not ln.startswith("---"))
    if r is None:
        return ctx
    v, t = r.verification, r.timing
    ver: list[tuple[str, str]] = []
    if v.sizes:
        ver.append(("sizes", ", ".join(map(str, v.sizes))))
    if v.shapes:
        ver.append(("shapes", "; ".join(", ".join(f"{k}={n}" for k, n in s.items()) for s in v.shapes)))
    if v.seeds:
        ver.append(("seeds", f"{v.seeds} per size"))
    if v.threads:
        ver.append(("threads", ", ".join(map(str, v.threads))))
    if v.ranks:
        ver.append(("ranks", ", ".join(map(str, v.ranks))))
    if v.device:
        ver.append(("device", v.device))
    ver.append(("race check", v.race_check))
    if v.max_abs_err is not None:
        ver.append(("max abs error", f"{v.max_abs_err:.3g}"))
    if v.max_rel_norm_err is not None:
        ver.append(("max rel. norm error", f"{v.max_rel_norm_err:.3g}"))
    ver.append(("timed outputs checked", "yes" if v.timed_outputs_checked else "no"))
    ctx["verification"] = ver
    ctx["race_detail"] = v.race_detail
    if t is not None:
        ctx["timing"] = {
            "speedup": fmt_x(t.speedup), "ci": f"[{t.ci_low:.2f}, {t.ci_high:.2f}]", "p": f"{t.p_value:.3g}",
            "paired_low": fmt_x(t.paired_low) if t.paired_low is not None else "-", "significant": t.significant,
            "consistent": t.consistent, "baseline": fmt_s(t.baseline_median_s), "candidate": fmt_s(t.candidate_median_s),
            "rounds": len(t.candidate_s), "threads": t.threads, "ranks": t.ranks, "device": t.device,
            "vs_eager": fmt_x(t.speedup_vs_eager) if t.speedup_vs_eager else None,
            "vs_compile": fmt_x(t.speedup_vs_compile) if t.speedup_vs_compile else None,
        }
    ctx["roofline"] = r.roofline.describe() if r.roofline is not None else ""
    if node.remeasure is not None and node.remeasure.timing is not None:
        rt = node.remeasure.timing
        ctx["remeasure"] = (f"{fmt_x(rt.speedup)} [{rt.ci_low:.2f}, {rt.ci_high:.2f}], p={rt.p_value:.3g}, "
                            f"{'significant' if node.remeasure.faster else 'not significant'} ({node.remeasure.status})")
    elif node.remeasure is not None:
        ctx["remeasure"] = f"{node.remeasure.status}: {node.remeasure.reason}"
    total = sum(r.phase_s.values()) or 1.0
    ctx["phases"] = [{"name": k, "s": f"{s:.2f}", "pct": f"{100 * s / total:.1f}"} for k, s in r.phase_s.items()]
    ctx["phase_total"] = f"{sum(r.phase_s.values()):.2f}"
    ctx["resources"] = [res.model_dump() for res in r.resources]
    ctx["compiler_report"] = r.compiler_report or ""  # compiler output about the candidate's source (escaped like the log)
    ctx["log"] = r.log if len(r.log) <= LOG_CHARS else f"[... {len(r.log) - LOG_CHARS} characters cut ...]\n{r.log[-LOG_CHARS:]}"
    ctx["speedup"] = speedup_text(r) if r.status == "ok" else ""
    return ctx
