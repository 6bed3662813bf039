"""Every flag and verdict explained once where it is shown (kernopt/verdicts.py): the progress lines, the
end-of-run summary, `kernopt eval`'s text and the HTML report."""

from __future__ import annotations

import io
import re
from pathlib import Path

from markupsafe import escape
from rich.console import Console

from kernopt.candidate import Candidate
from kernopt.config import RunConfig
from kernopt.evaluators.result import EvalResult, Verification
from kernopt.report import render_run
from kernopt.runs import RunStore
from kernopt.ui import ProgressHooks, print_eval, print_summary
from kernopt.verdicts import FLAGS, RACE, SIGNIFICANCE, STATUS, explain, legend, shown
from tests.conftest import SMALL_GEMM
from tests.test_report import BASE_SRC, ok

IMPLAUSIBLE = FLAGS["implausible_speedup"]


def console() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=400, color_system=None, force_terminal=False), buf


def flagged(c: Candidate) -> EvalResult:
    r = ok(c, 30.0, 25.0, 35.0)
    r.flags = ["implausible_speedup", "rechecked"]
    return r


def test_every_flag_the_evaluators_set_is_explained() -> None:
    for word in ("implausible_speedup", "timing_inconsistent", "no_gpu_timing", "rechecked", "machine_busy"):
        assert explain(word), word
    c = Candidate(files={"kernel.c": BASE_SRC}, author="llm")
    assert shown(flagged(c)) == ["ok", "clean", "significant", "implausible_speedup", "rechecked"]
    assert legend(["ok", "ok", "mystery", "rechecked"]) == [f"ok: {STATUS['ok']}", f"rechecked: {FLAGS['rechecked']}"]


def test_progress_explains_a_flag_once_per_run() -> None:
    con, buf = console()
    hooks = ProgressHooks(con, 3)
    c1 = Candidate(files={"kernel.c": BASE_SRC}, author="llm", idea="one")
    c2 = Candidate(files={"kernel.c": BASE_SRC + "\n"}, author="llm", idea="two")
    hooks.on_eval_done(c1, flagged(c1), False, None)
    hooks.on_eval_done(c2, flagged(c2), False, None)
    out = buf.getvalue()
    assert out.count("flags implausible_speedup, rechecked") == 2  # the flags on each candidate's line
    assert out.count(f"implausible_speedup: {IMPLAUSIBLE}") == 1 and out.count(f"rechecked: {FLAGS['rechecked']}") == 1


def test_summary_counts_flags_and_explains_what_it_shows(tmp_path: Path) -> None:
    s = {"candidates": 4, "statuses": {"ok": 2, "rejected": 1, "compile_error": 1}, "elapsed_s": 10.0, "race_check": "on",
         "race_checks": {"clean": 2}, "flags": {"implausible_speedup": 2, "rechecked": 2}, "best_candidate": "abc",
         "best_speedup": 30.0, "best_ci": [25.0, 35.0], "best_significant": True, "best_flags": ["implausible_speedup"],
         "best_idea": "tile"}
    con, buf = console()
    print_summary(con, s, tmp_path)
    out = buf.getvalue()
    assert "flags: implausible_speedup 2, rechecked 2" in out
    for line in (f"implausible_speedup: {IMPLAUSIBLE}", f"rejected: {STATUS['rejected']}", f"compile_error: {STATUS['compile_error']}",
                 f"clean: {RACE['clean']}", f"significant: {SIGNIFICANCE['significant']}"):
        assert out.count(line) == 1, line
    assert "not significant:" not in out and "timing_inconsistent" not in out  # only what is shown


def test_eval_text_explains_its_status_race_verdict_significance_and_flags() -> None:
    c = Candidate(files={"kernel.c": BASE_SRC}, author="user")
    con, buf = console()
    print_eval(con, "small_gemm", flagged(c))
    out = buf.getvalue()
    assert "flags: implausible_speedup, rechecked" in out
    for line in (f"ok: {STATUS['ok']}", f"clean: {RACE['clean']}", f"significant: {SIGNIFICANCE['significant']}",
                 f"implausible_speedup: {IMPLAUSIBLE}", f"rechecked: {FLAGS['rechecked']}"):
        assert out.count(line) == 1, line
    con, buf = console()
    print_eval(con, "small_gemm", EvalResult(candidate_id=c.id, status="rejected", reason="calls sched_yield"))
    out = buf.getvalue()
    assert f"rejected: {STATUS['rejected']}" in out and "significant" not in out and "clean" not in out


def test_report_has_a_legend_and_title_attributes(tmp_path: Path) -> None:
    store = RunStore.create(RunConfig(task=str(SMALL_GEMM), runs_dir=tmp_path, sandbox="local"), "small_gemm", run_id="legend")
    base = Candidate(files={"kernel.c": BASE_SRC}, author="baseline", idea="the task's own kernel")
    store.append("start", task="small_gemm", already_evaluated=0, baseline=base.model_dump())
    a = Candidate(files={"kernel.c": BASE_SRC + "/* a */\n"}, parent=base.id, author="llm", idea="too good")
    b = Candidate(files={"kernel.c": BASE_SRC + "/* b */\n"}, parent=base.id, author="llm", idea="refused")
    store.record_eval(a, flagged(a).model_copy(update={"compiler_report": "line 2 (for (long i = 0; i < n; i++)): loop vectorized"}))
    store.record_eval(b, EvalResult(candidate_id=b.id, status="rejected", reason="calls <sched_yield>",
                                    verification=Verification(race_check="not_run")))
    store.close()
    html = render_run(store.root)
    legend_html = re.search(r'<details class="words">(.*?)</details>', html, re.S)
    assert legend_html is not None
    words = re.findall(r"<dt>([^<]+)</dt>", legend_html.group(1))
    assert words == ["ok", "clean", "significant", "implausible_speedup", "rechecked", "rejected"]
    assert html.count(f"<dd>{IMPLAUSIBLE}</dd>") == 1
    assert f'title="{IMPLAUSIBLE}">implausible_speedup</span>' in html  # the flag badge explains itself on hover
    assert f'title="{STATUS["rejected"]}">rejected</span>' in html
    assert f'title="{escape(SIGNIFICANCE["significant"])}">significant</span>' in html  # "p < 0.01" escaped
    assert "loop vectorized" in html and "calls &lt;sched_yield&gt;" in html
