"""Issue 19, a newcomer's first hour: status texts, candidate references, resume options, signals."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from kernopt.candidate import Candidate
from kernopt.evaluators.result import EvalResult, TimingStats


def timed(c: Candidate, speedup: float, lo: float, hi: float, significant: bool) -> EvalResult:
    t = TimingStats(baseline_s=[1.0] * 5, candidate_s=[1.0 / speedup] * 5, baseline_median_s=1.0, candidate_median_s=1.0 / speedup,
                    speedup=speedup, ci_low=lo, ci_high=hi, p_value=0.001 if significant else 0.5,
                    paired_low=lo if significant else None)
    return EvalResult(candidate_id=c.id, status="ok", reason="verified", timing=t)


def test_slower_verified_candidate_does_not_read_as_ok() -> None:
    from kernopt.ui import ProgressHooks

    buf = io.StringIO()
    hooks = ProgressHooks(Console(file=buf, width=200), 3)
    slow, same, fast = (Candidate(files={"kernel.c": str(i)}, idea=f"idea {i}") for i in range(3))
    hooks.on_eval_done(slow, timed(slow, 0.30, 0.29, 0.31, False), False, None)
    hooks.on_eval_done(same, timed(same, 1.02, 0.97, 1.06, False), False, None)
    hooks.on_eval_done(fast, timed(fast, 2.0, 1.9, 2.1, True), False, None)
    lines = buf.getvalue().splitlines()
    assert "ok (slower)" in lines[0] and "0.30x" in lines[0]
    assert "ok (not faster)" in lines[1] and "1.02x" in lines[1]
    assert f"{fast.id} ok " in lines[2] and "(" not in lines[2].split("2.00x")[0].split(fast.id)[1]


def test_summary_best_not_significant_says_so(tmp_path: Path) -> None:
    from kernopt.ui import print_summary

    buf = io.StringIO()
    s = {"best_candidate": "abc", "best_speedup": 0.9, "best_ci": [0.85, 0.95], "best_significant": False,
         "best_lineage": ["x"], "candidates": 1, "statuses": {"ok": 1}, "elapsed_s": 1.0}
    print_summary(Console(file=buf, width=200), s, tmp_path)
    assert "0.90x (slower)" in buf.getvalue()
    buf = io.StringIO()
    print_summary(Console(file=buf, width=200), {**s, "best_speedup": 3.0, "best_ci": [2.9, 3.1], "best_significant": True}, tmp_path)
    assert "3.00x (95% CI" in buf.getvalue()


def fake_run(tmp_path: Path, n: int = 3) -> tuple[Path, list[Candidate]]:
    """A run of n evaluated candidates (no candidate id starts with a digit row number, so a prefix reading cannot pass)."""
    from kernopt.config import RunConfig
    from kernopt.runs import RunStore

    store = RunStore.create(RunConfig(task=str(Path("tasks/openmp/gemm").resolve()), runs_dir=tmp_path), "gemm")
    store.append("start", task="gemm", already_evaluated=0,
                 baseline=Candidate(files={"kernel.c": "baseline\n"}, author="baseline").model_dump())
    cands: list[Candidate] = []
    k = 0
    while len(cands) < n:
        c = Candidate(files={"kernel.c": f"version {len(cands) + 1}\n"}, idea=f"idea {k}", author="tuner")
        k += 1
        if c.id[0].isdigit():  # keep ids that a digit could not prefix
            c = c.model_copy(update={"defines": {"V": str(k)}})
            if c.id[0].isdigit():
                continue
        store.record_eval(c, EvalResult(candidate_id=c.id, status="wrong_answer", reason="bad"))
        cands.append(c)
    store.close()
    return store.root, cands


def test_runs_diff_takes_the_row_numbers_runs_show_prints(tmp_path: Path) -> None:
    from tests.test_cli import kernopt, one_error_line

    run, cands = fake_run(tmp_path)
    shown = kernopt("runs", "show", str(run))
    assert shown.returncode == 0, shown.stderr
    rows = [ln.split() for ln in shown.stdout.splitlines() if "│" in ln or "|" in ln]
    flat = " ".join(" ".join(r) for r in rows)
    assert "baseline" in flat  # the baseline is listed, as row 0
    p = kernopt("runs", "diff", str(run), "1", "3")
    assert p.returncode == 0, p.stderr
    assert "-version 1" in p.stdout and "+version 3" in p.stdout
    p = kernopt("runs", "diff", str(run), "0", "2")
    assert p.returncode == 0, p.stderr
    assert "-baseline" in p.stdout and "+version 2" in p.stdout
    p = kernopt("runs", "diff", str(run), "baseline", cands[1].id[:6])
    assert p.returncode == 0 and "+version 2" in p.stdout
    p = kernopt("runs", "diff", str(run), "4", "1")
    assert p.returncode == 2
    assert "no candidate #4" in one_error_line(p)


def test_runs_diff_ambiguous_prefix_is_one_line_listing_the_matches(tmp_path: Path) -> None:
    from tests.test_cli import kernopt, one_error_line

    run, cands = fake_run(tmp_path, 7)  # 7 ids starting with one of a-f: two share their first character
    first = [c.id[0] for c in cands]
    ch = next(x for x in first if first.count(x) > 1)
    p = kernopt("runs", "diff", str(run), ch, "best")
    assert p.returncode == 2
    line = one_error_line(p)
    assert "ambiguous" in line and all(c.id in line for c in cands if c.id[0] == ch)
