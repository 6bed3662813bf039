"""A bench directory as HTML (format: docs/bench-design.md, "The bench directory"): the suite figures,
the fast_p curve, the per-task table and each task's run report in a collapsible section."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from markupsafe import Markup

from kernopt.errors import UserError
from kernopt.report import svg
from kernopt.report.run_page import fmt_s, fmt_x, run_context

# bench row status -> the run report's status colours
ROW_CLASS = {"faster": "faster", "no_speedup": "ok", "failed": "wrong_answer", "timeout": "timeout", "crashed": "runtime_error",
             "running": "unverified", "pending": "baseline"}
FAST_P = ("1.0", "1.1", "1.5", "2.0")


def _json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UserError(f"{path} is unreadable or invalid: {str(e).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path} is not a JSON object")
    return data


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) else None


def _run_dir(bench_dir: Path, row: dict[str, Any]) -> Path | None:
    """A row's run directory: as written, relative to the bench, or runs/<its name> here (a bench moved
    or copied from another machine)."""
    given = str(row.get("run_dir") or "")
    if not given:
        return None
    for p in (Path(given), bench_dir / given, bench_dir / "runs" / Path(given).name):
        if (p / "config.json").is_file():
            return p
    return None


def _rows_from_runs(bench_dir: Path) -> list[dict[str, Any]]:
    """Rows for a bench without summary.json (still running, or killed): one per run directory."""
    rows = []
    runs = bench_dir / "runs"
    for d in sorted(runs.iterdir()) if runs.is_dir() else []:
        if not (d / "config.json").is_file():
            continue
        s = _json(d / "summary.json") or {}
        finished = s.get("status") == "finished"
        status = ("faster" if s.get("best_significant") else "no_speedup") if finished else "running"
        rows.append({"key": d.name, "status": status, "best_speedup": s.get("best_speedup") if finished else None,
                     "ci_low": (s.get("best_ci") or [None, None])[0], "ci_high": (s.get("best_ci") or [None, None])[1],
                     "candidates": s.get("candidates"), "elapsed_s": s.get("elapsed_s"), "run_dir": str(d)})
    return rows


def bench_context(bench_dir: Path) -> dict[str, Any]:
    from kernopt.report.data import load_run
    from kernopt.runs import RunStore

    bench = _json(bench_dir / "bench.json")
    if bench is None:
        raise UserError(f"{bench_dir} is not a bench directory (no bench.json)")
    summary = _json(bench_dir / "summary.json")
    note = ""
    if summary is None:
        rows = _rows_from_runs(bench_dir)
        suite: dict[str, Any] = {"tasks": len(bench.get("items") or []) or None}
        note = "no summary.json yet (the bench is running or was stopped): the table shows the run directories found"
    else:
        rows = [r for r in summary.get("tasks") or [] if isinstance(r, dict)]
        got = summary.get("suite")
        suite = got if isinstance(got, dict) else {}

    got = suite.get("fast_p")
    fast_p: dict[str, Any] = got if isinstance(got, dict) else {}
    n_tasks = int(_num(suite.get("tasks")) or len(rows))
    wins = [s for r in rows if r.get("status") == "faster" and (s := _num(r.get("best_speedup"))) is not None]
    suite_ctx = {
        "tasks": suite.get("tasks"), "finished": suite.get("finished"), "correctness_rate": _num(suite.get("correctness_rate")),
        "geomean_speedup": _num(suite.get("geomean_speedup")), "candidates": suite.get("candidates"),
        "verified_candidates": suite.get("verified_candidates"), "elapsed_s": _num(suite.get("elapsed_s")),
        "spend": suite.get("spend") if isinstance(suite.get("spend"), dict) and (suite["spend"].get("calls") or suite["spend"].get("usd")) else None,
        "fast_p": [(p, _num(fast_p.get(p))) for p in FAST_P] if summary is not None else [],
    }
    settings = []
    rc = _dict(bench.get("run_config"))
    search = _dict(rc.get("search"))
    for k, v in (("created", bench.get("created")), ("kernopt", bench.get("kernopt")), ("executor", bench.get("executor")),
                 ("jobs", bench.get("jobs")), ("filter", bench.get("filter")), ("policy", rc.get("policy")),
                 ("search", search.get("type")), ("budget", search.get("max_candidates")), ("sandbox", rc.get("sandbox")),
                 ("model", _dict(rc.get("model")).get("name") if rc.get("policy") == "llm" else None)):
        if v not in (None, ""):
            settings.append((k, str(v)))

    out_rows = []
    for i, row in enumerate(rows):
        status = str(row.get("status", "?"))
        speed, lo, hi = _num(row.get("best_speedup")), _num(row.get("ci_low")), _num(row.get("ci_high"))
        usd, tokens = _num(row.get("usd")), row.get("tokens")
        cand, ver = row.get("candidates"), row.get("verified_candidates")
        ctx: dict[str, Any] = {
            "key": str(row.get("key", f"task {i + 1}")), "status": status, "cls": ROW_CLASS.get(status, "rejected"),
            "anchor": f"t{i}", "baseline": fmt_s(_num(row.get("baseline_s"))),
            "speedup": fmt_x(speed) if status in ("faster", "no_speedup") else "-",
            "ci": f"{lo:.2f}–{hi:.2f}" if lo is not None and hi is not None else "-",
            "candidates": "-" if cand is None else (f"{cand} ({ver} verified)" if ver is not None else str(cand)),
            "elapsed": f"{_num(row.get('elapsed_s')):.0f} s" if _num(row.get("elapsed_s")) is not None else "-",
            "spend": f"${usd:.4f} · {tokens} tok" if usd else "-", "error": str(row.get("error") or ""),
            "run": None, "run_note": "",
        }
        run_dir = _run_dir(bench_dir, row)
        if run_dir is None:
            ctx["run_note"] = f"no run directory found for this task ({row.get('run_dir') or 'none recorded'})"
        else:
            try:
                ctx["run"] = run_context(load_run(RunStore.open(run_dir)), ns=f"t{i}-")
            except UserError as e:
                ctx["run_note"] = f"its run directory could not be read: {e}"
        out_rows.append(ctx)

    return {"name": str(bench.get("name") or bench_dir.name), "dir": str(bench_dir), "note": note, "suite": suite_ctx,
            "settings": settings, "rows": out_rows, "fast_p_svg": Markup(svg.fast_p_curve(wins, n_tasks))}
