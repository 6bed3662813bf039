"""Review: `kernopt runs diff` and `kernopt runs report` (one self-contained HTML page for a run or a bench).

A real tuner run on tests/data/small_gemm (local sandbox, 5 candidates; made once for the module) is
reported and opened in headless Chromium: the page's script must finish (body[data-rendered=ok]) without
errors, and the lineage nodes, the plot and the diffs must be in the rendered DOM; a screenshot is kept
under $KERNOPT_TEST_ARTIFACTS (default test-artifacts/). Runs and benches made by hand in the documented
formats (RunStore's files; docs/bench-design.md "The bench directory") cover what a short tuner run may
not show: a deeper lineage, removed lines, critiques, failures, a bench's fast_p curve, and HTML injection
through every field a candidate or a model controls.

Without Chromium the browser tests skip, saying so; with KERNOPT_REQUIRE_CHROMIUM=1 (CI) they fail.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from kernopt.candidate import Candidate
from kernopt.config import RunConfig
from kernopt.evaluators.result import EvalResult, PairedComparison, Roofline, TimingStats, Verification
from kernopt.runs import RunStore
from tests.conftest import REPO, SMALL_GEMM, needs

PAYLOAD = "</script><script>alert(1)</script>"
CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
ARTIFACTS = Path(os.environ.get("KERNOPT_TEST_ARTIFACTS") or REPO / "test-artifacts")


def kernopt(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kernopt", *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, **(env or {})}, timeout=600)


def one_error_line(p: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    return lines[0]


# ------------------------------------------------------------------------------ chromium
def chromium() -> str:
    if CHROMIUM is None:
        if os.environ.get("KERNOPT_REQUIRE_CHROMIUM") == "1":
            pytest.fail("KERNOPT_REQUIRE_CHROMIUM=1 but no chromium on PATH (apt-get install chromium)")
        pytest.skip("needs chromium for the browser checks (apt-get install chromium; scripts/test.sh installs it)")
    return CHROMIUM


def browse(html: Path, *args: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="kernopt-chromium-") as profile:
        return subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
                               f"--user-data-dir={profile}", *args, html.resolve().as_uri()],
                              capture_output=True, text=True, timeout=180)


def rendered_dom(html: Path) -> str:
    p = browse(html, "--dump-dom")
    assert p.returncode == 0 and "<body" in p.stdout, p.stderr[-2000:]
    return p.stdout


def body_tag(dom: str) -> str:
    m = re.search(r"<body[^>]*>", dom)
    assert m, dom[:500]
    return m.group(0)


def assert_rendered_cleanly(dom: str) -> None:
    body = body_tag(dom)
    assert 'data-rendered="ok"' in body, f"the page's script did not finish: {body}"
    assert "data-errors" not in body, f"script errors: {body}"


def screenshot(html: Path, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    png = ARTIFACTS / name
    png.unlink(missing_ok=True)
    p = browse(html, f"--screenshot={png.resolve()}", "--window-size=1280,2400")
    assert p.returncode == 0, p.stderr[-2000:]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1280, 2400)
    assert len(data) > 40_000, f"{png}: {len(data)} bytes, an almost empty page"
    return png


# ------------------------------------------------------------------------------ hand-made runs
def timing(speedup: float, lo: float, hi: float, p: float = 0.001) -> TimingStats:
    base = [0.010] * 7
    cand = [0.010 / speedup] * 7
    return TimingStats(baseline_s=base, candidate_s=cand, baseline_median_s=0.010, candidate_median_s=0.010 / speedup, speedup=speedup,
                       ci_low=lo, ci_high=hi, p_value=p, paired_low=lo, threads=2)


def ok(c: Candidate, speedup: float, lo: float, hi: float, p: float = 0.001) -> EvalResult:
    return EvalResult(candidate_id=c.id, status="ok", reason=f"verified; {speedup:.2f}x", timing=timing(speedup, lo, hi, p),
                      verification=Verification(sizes=[1, 7, 33, 81], seeds=5, threads=[1, 2, 3, 4], race_check="clean",
                                                race_detail="no report at 2 and 4 threads (-O1) or 3 threads (-O0)",
                                                max_abs_err=1e-13, timed_outputs_checked=True),
                      phase_s={"build": 0.2, "verify": 0.4, "race": 0.9, "time": 2.5})


BASE_SRC = "void gemm(long n, const double *a, const double *b, double *c) {\n    for (long i = 0; i < n; i++)\n        c[i] = a[i] * b[i];\n}\n"


def make_run(runs_dir: Path, run_id: str, idea_extra: str = "", source_extra: str = "", model_text: str = "the loop is serial") -> Path:
    """A finished run of 5 candidates: baseline -> A (1.6x, faster) -> B (2.5x, faster, the best, lines removed),
    A -> C (compile error), baseline -> D (0.9x, not significant), B -> E (wrong answer); critiques; B re-measured."""
    store = RunStore.create(RunConfig(task=str(SMALL_GEMM), runs_dir=runs_dir, sandbox="local"), "small_gemm", run_id=run_id)
    base = Candidate(files={"kernel.c": BASE_SRC}, author="baseline", idea="the task's own kernel")
    store.append("start", task="small_gemm", already_evaluated=0, baseline=base.model_dump())
    a = Candidate(files={"kernel.c": BASE_SRC.replace("    for", "    #pragma omp parallel for\n    for")}, parent=base.id,
                  author="openai/scripted", idea="parallelize the i loop " + idea_extra)
    b_src = a.files["kernel.c"].replace("        c[i] = a[i] * b[i];\n", "        c[i] = b[i] * a[i]; /* swapped */\n") + source_extra
    b = Candidate(files={"kernel.c": b_src}, parent=a.id, author="openai/scripted", idea="swap the operands, a[i] stays " + idea_extra,
                  defines={"BLOCK": "64"})
    c = Candidate(files={"kernel.c": b_src.replace("c[i] =", "c[i] = =")}, parent=a.id, author="openai/scripted", idea="break it")
    d = Candidate(files={"kernel.c": BASE_SRC}, cflags=["-march=native"], parent=base.id, author="tuner", idea="compile for the host CPU")
    e = Candidate(files={"kernel.c": b_src.replace("b[i] * a[i]", "b[i] + a[i]")}, parent=b.id, author="openai/scripted", idea="add instead")
    b_result = ok(b, 2.5, 2.2, 2.9)
    b_result.vs_best = PairedComparison(best_id=a.id, ratio=1.55, ci_low=1.41, ci_high=1.62, paired_low=1.38, p_value=0.004,
                                        candidate_median_s=0.004, best_median_s=0.0062, replaces_best=True)
    b_result.phase_s["vs_best"] = 2.25
    b_result.roofline = Roofline(flops=2e6, bytes=2.4e7, seconds=0.004, gflops=0.5, gbps=6.0, threads=2, peak_gflops=20.0,
                                 bandwidth_gbps=12.0, bound="memory", bound_s=0.002, fraction=0.5)
    results = [
        (a, ok(a, 1.6, 1.3, 1.9)),
        (b, b_result),
        (c, EvalResult(candidate_id=c.id, status="compile_error", reason="kernel.c:4: error: expected expression " + idea_extra,
                       log="kernel.c:4:16: error: expected expression\n" + source_extra, phase_s={"build": 0.1})),
        (d, ok(d, 0.9, 0.7, 1.2, p=0.4)),
        (e, EvalResult(candidate_id=e.id, status="wrong_answer", reason="n=33 seed 2: max abs error 4.1 " + idea_extra,
                       verification=Verification(sizes=[1, 7, 33], seeds=5, threads=[1, 2], max_abs_err=4.1), flags=["suspicious" + idea_extra])),
    ]
    for cand, res in results:
        store.record_eval(cand, res)
        store.append("critique", candidate_id=cand.id, fallback=False,
                     critique={"candidate_id": cand.id, "status": res.status, "diagnosis": f"{model_text} ({cand.idea})",
                               "bottleneck": "memory" + idea_extra, "next_ideas": ["tile it " + idea_extra, "vectorize"]})
    final = ok(b, 2.4, 2.1, 2.8)
    store.append("remeasure", result=final.model_dump(mode="json"))
    store.write_best(b, final)
    store.write_summary({"status": "finished", "run_id": run_id, "run_dir": str(store.root), "task": "small_gemm", "target": "openmp",
                         "policy": "tuner", "search": "greedy", "sandbox": "local", "candidates": 5,
                         "statuses": {"ok": 3, "compile_error": 1, "wrong_answer": 1}, "faster_candidates": 2, "elapsed_s": 12.0,
                         "best_candidate": b.id, "best_idea": b.idea, "best_speedup": 2.4, "best_ci": [2.1, 2.8], "best_status": "ok",
                         "best_significant": True, "search_speedup": 2.5, "stopped_by": "candidate budget of 5 used"})
    store.append("end", best_speedup=2.4, best_status="ok")
    store.close()
    return store.root


# ------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def tuner_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A real run: the offline tuner, 5 candidates on small_gemm in the local sandbox."""
    runs = tmp_path_factory.mktemp("report-runs")
    # A host lock of its own (kernopt/placement.py): this run's timings are not what is tested here, and it
    # should not queue behind other kernopt runs timing on a shared machine.
    p = kernopt("optimize", str(SMALL_GEMM), "--budget", "5", "--sandbox", "local", "--runs-dir", str(runs), "--json",
                env={"KERNOPT_HOST_LOCK": str(runs / "host.lock")})
    assert p.returncode == 0, p.stderr[-3000:]
    summary = json.loads(p.stdout)
    return Path(summary["run_dir"]), summary


@pytest.fixture(scope="module")
def hand_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("hand-runs"), "20260101-000000-small_gemm-hand")


def logged(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(ln) for ln in (run_dir / "events.jsonl").read_text().splitlines() if ln.strip()]


def eval_ids(run_dir: Path) -> list[str]:
    return [e["result"]["candidate_id"] for e in logged(run_dir) if e["type"] == "eval"]


# ------------------------------------------------------------------------------ runs report: a real run
@needs("gcc", "clang")
def test_report_of_a_real_run_renders_in_chromium(tuner_run: tuple[Path, dict[str, Any]]) -> None:
    run_dir, summary = tuner_run
    p = kernopt("runs", "report", str(run_dir))
    assert p.returncode == 0, p.stderr
    html_path = Path(p.stdout.strip())
    assert html_path == run_dir / "report.html" and html_path.is_file()
    html = html_path.read_text()
    # self-contained: nothing to fetch, one script of our own
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)|<link\b|@import|url\(""", html, re.I)
    assert len(re.findall(r"<script\b", html, re.I)) == 1

    dom = rendered_dom(html_path)
    assert_rendered_cleanly(dom)
    ids = eval_ids(run_dir)
    assert len(ids) == summary["candidates"] == 5
    start = next(e for e in logged(run_dir) if e["type"] == "start")
    baseline_id = Candidate.model_validate(start["baseline"]).id  # the run log keeps its baseline
    for cid in [baseline_id, *ids]:
        assert f'data-node="{cid}"' in dom, f"lineage node {cid} missing"
        assert f'id="c-{cid}"' in dom, f"candidate section {cid} missing"
    # the plot: the best-so-far step line and one point per timed candidate
    timed = [e for e in logged(run_dir) if e["type"] == "eval" and e["result"]["status"] == "ok" and e["result"]["timing"]]
    assert re.search(r'<path class="step" d="M[\d.]+,[\d.]+(H[\d.]+V[\d.]+){5}H[\d.]+"', dom)
    assert len(re.findall(r'<circle class="pt st-', dom)) == len(timed)
    # the tuner's candidates add lines to their parent: the diff shows them highlighted
    assert '<span class="gi">+' in dom
    # the script built the status filters from the candidate sections
    assert re.search(r'class="filters"[^>]*data-chips="\d+"', dom)
    if summary.get("best_candidate"):
        assert f'class="cand best" id="c-{summary["best_candidate"]}"' in dom
    png = screenshot(html_path, "report-run.png")
    shutil.copy(html_path, ARTIFACTS / "report-run.html")
    assert png.stat().st_size > 40_000


@needs("gcc", "clang")
def test_runs_diff_on_a_real_run(tuner_run: tuple[Path, dict[str, Any]]) -> None:
    run_dir, summary = tuner_run
    ids = eval_ids(run_dir)
    first = ids[0]
    # a unique prefix, and baseline: piped output is a plain unified diff, no terminal escapes
    prefix = next(first[:n] for n in range(4, 13) if sum(i.startswith(first[:n]) for i in ids) == 1)
    p = kernopt("runs", "diff", str(run_dir), "baseline", prefix)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("--- baseline/") and f"+++ {first}/" in p.stdout.splitlines()[1]
    assert "\x1b[" not in p.stdout
    assert any(ln.startswith("+") and not ln.startswith("+++") for ln in p.stdout.splitlines())
    # best: the summary's best candidate, or the baseline when none was significantly faster
    p = kernopt("runs", "diff", str(run_dir), "best", "baseline")
    assert p.returncode == 0, p.stderr
    if summary.get("best_candidate"):
        assert p.stdout.startswith(f"--- {summary['best_candidate']}/")
    else:
        assert "baseline and baseline are identical" in p.stdout and "`best` is the baseline" in p.stderr
    p = kernopt("runs", "diff", str(run_dir), first, first)
    assert p.returncode == 0 and "are identical" in p.stdout


# ------------------------------------------------------------------------------ runs diff: ids and errors
def test_runs_diff_ids_errors_and_colour(hand_run: Path) -> None:
    ids = eval_ids(hand_run)
    a, b = ids[0], ids[1]
    p = kernopt("runs", "diff", str(hand_run), a[:6], "best")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[:2] == [f"--- {a}/kernel.c", f"+++ {b}/kernel.c"]
    assert "-        c[i] = a[i] * b[i];" in lines and "+        c[i] = b[i] * a[i]; /* swapped */" in lines
    assert "--- /dev/null" in lines and "+-DBLOCK=64" in lines  # knobs are diffed too
    # unknown id: one line, naming close ids
    p = kernopt("runs", "diff", str(hand_run), a[:5] + "zz", b)
    assert p.returncode == 2
    line = one_error_line(p)
    assert f"no candidate '{a[:5]}zz'" in line and a in line
    # a prefix two ids share (the baseline's and the last candidate's first digit, in this hand-made run): one line listing them
    start = next(e for e in logged(hand_run) if e["type"] == "start")
    everything = [Candidate.model_validate(start["baseline"]).id, *ids]
    shared = next(i[:1] for i in everything if sum(j.startswith(i[:1]) for j in everything) > 1)
    p = kernopt("runs", "diff", str(hand_run), shared, "baseline")
    line = one_error_line(p)
    assert p.returncode == 2 and "ambiguous" in line
    assert all(i in line for i in everything if i.startswith(shared))
    p = kernopt("runs", "diff", str(hand_run), "", "baseline")
    assert p.returncode == 2 and "give a candidate id" in one_error_line(p)
    # in a terminal (forced): highlighted
    p = kernopt("runs", "diff", str(hand_run), "baseline", "best", env={"FORCE_COLOR": "1", "TERM": "xterm-256color"})
    assert p.returncode == 0 and "\x1b[" in p.stdout and "swapped" in p.stdout
    p = kernopt("runs", "diff", "no-such-run", "a", "b", "--runs-dir", str(hand_run.parent))
    assert p.returncode == 2 and "no run 'no-such-run'" in one_error_line(p)


def test_runs_show_prints_ideas_as_written(hand_run: Path) -> None:
    p = kernopt("runs", "show", str(hand_run))
    assert p.returncode == 0, p.stderr
    assert "a[i] stays" in p.stdout  # not eaten as rich markup
    assert "time per phase (total, median per candidate): build 0.7 s (0.2 s)" in p.stdout and "vs_best 2.2 s (2.2 s)" in p.stdout


# ------------------------------------------------------------------------------ the hand-made run's report
def test_report_of_a_hand_made_run(hand_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "hand.html"
    p = kernopt("runs", "report", str(hand_run), "-o", str(out))
    assert p.returncode == 0 and p.stdout.strip() == str(out), p.stderr
    html = out.read_text()
    ids = eval_ids(hand_run)
    a, b, c, d, e = ids
    # the best path baseline -> a -> b is highlighted; c, d, e are not on it
    assert html.count('class="edge best"') == 2
    for cid in (a, b):
        assert re.search(rf'<a class="node best" href="#c-{cid}"', html)
    for cid in (c, d, e):
        assert re.search(rf'<a class="node" href="#c-{cid}"', html)
    assert f'class="cand best" id="c-{b}"' in html
    assert "2.40×" in html and "2.10–2.80" in html  # the re-measured speedup and its interval in the header
    assert "the loop is serial (swap the operands" in html  # a critique, in its candidate's section
    assert '<span class="gd">-        c[i] = a[i] * b[i];' in html  # removed lines in the diff to the parent
    assert "kernel.c:4:16: error: expected expression" in html  # a failure's log
    assert "max abs error" in html and "race check" in html and "timed outputs checked" in html
    assert "memory-bound, 50% of the bound" in html  # the roofline line of a timed candidate
    assert "4.000 ms, 2.50× [2.20, 2.90]; vs best: 1.55x [1.41, 1.62]" in html  # time per call, speedup, the paired ratio
    # the run's phase table: build 0.2 + 0.2 + 0.1 + 0.2 s over 4 candidates, vs_best 2.25 s for one
    assert "Where the candidates' time went" in html
    num = '</td><td class="num">'
    assert re.search(rf"<td>build{num}0\.7{num}\d+%{num}0\.20{num}4</td>", html)
    assert re.search(r"<td>vs_best</td><td class=\"num\">2\.2</td>.*?<td class=\"num\">1</td>", html)
    dom = rendered_dom(out)
    assert_rendered_cleanly(dom)
    assert '<span class="gd">' in dom and '<span class="gi">' in dom
    assert len(re.findall(r'<circle class="pt st-', dom)) == 3  # a, b, d were timed; c and e were not
    assert len(re.findall(r'<path class="rug st-', dom)) == 2


def test_report_escapes_everything_from_the_run(tmp_path: Path) -> None:
    pwn = "<img src=x onerror=\"document.body.dataset.pwned='1'\"><script>document.body.dataset.pwned='1'</script>"
    run = make_run(tmp_path / "runs", "20260101-000000-inject", idea_extra=PAYLOAD, source_extra=f"/* {PAYLOAD} {pwn} */\n",
                   model_text=f"{PAYLOAD} {pwn} \" onmouseover=\"x")
    p = kernopt("runs", "report", str(run))
    assert p.returncode == 0, p.stderr
    html = (run / "report.html").read_text()
    assert len(re.findall(r"<script\b", html, re.I)) == 1, "a script element from the run's text"
    assert "<img" not in html.lower()
    assert PAYLOAD not in html and "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in html
    dom = rendered_dom(run / "report.html")
    assert_rendered_cleanly(dom)
    assert "pwned" not in body_tag(dom)
    assert len(re.findall(r"<script\b", dom, re.I)) == 1 and "<img" not in dom.lower()
    assert "alert(1)" in dom  # shown as text


def test_report_says_when_the_best_did_not_hold_up(tmp_path: Path) -> None:
    """A best that was not significant on re-measurement is not shown as a verified speedup; an unfinished
    run (killed: no summary, the last line torn) is reported as such, with its best so far."""
    run = make_run(tmp_path / "runs", "20260101-000000-notconfirmed")
    s = json.loads((run / "summary.json").read_text())
    s.update(best_significant=False, best_speedup=0.8, best_ci=[0.5, 1.6])
    (run / "summary.json").write_text(json.dumps(s))
    from kernopt.report import render_run

    html = render_run(run)
    assert "was not\n      significantly faster on re-measurement: 0.80×" in html and "search&#39;s best" in html
    assert "★ search&#39;s best, not confirmed on re-measurement" in html and 'class="v big"' not in html
    (run / "summary.json").unlink()
    events = (run / "events.jsonl").read_bytes()
    (run / "events.jsonl").write_bytes(events[: events.rindex(b'{"t"')] + b'{"t": 1, "type": "end", "best_')  # torn
    html = render_run(run)
    assert "<div class=\"v\">incomplete</div>" in html and "not re-measured" not in html  # the re-measurement is still in the log
    assert "· re-measured, significant" in html and "2.40×" in html


# ------------------------------------------------------------------------------ bench report
def make_bench(root: Path) -> Path:
    """A bench directory as docs/bench-design.md describes it: 3 tasks, one faster (2.4x), one without a
    speedup, one crashed (no run directory); two of them with their run directories."""
    bench = root / "benches" / "openmp-tuner"
    (bench / "runs").mkdir(parents=True)
    faster = make_run(bench / "runs", "openmp__gemm")
    slow = make_run(bench / "runs", "openmp__jacobi2d", model_text="jacobi")
    s = json.loads((slow / "summary.json").read_text())
    s.update(best_candidate=None, best_speedup=1.0, best_ci=None, best_significant=False, best_status="baseline")
    (slow / "summary.json").write_text(json.dumps(s))
    run_config = json.loads(RunConfig(task="", sandbox="local").model_dump_json())
    items = [{"key": "openmp/gemm", "task": "tasks/openmp/gemm"}, {"key": "openmp/jacobi2d", "task": "tasks/openmp/jacobi2d"},
             {"key": "openmp/dot", "task": "tasks/openmp/dot"}]
    head = {"name": "openmp-tuner", "created": "2026-01-01T00:00:00+0000", "kernopt": "0.1.0", "executor": "local", "jobs": 2,
            "filter": None, "run_config": run_config}
    (bench / "bench.json").write_text(json.dumps({**head, "items": items}))
    row = dict.fromkeys(["key", "task", "status", "baseline_s", "best_speedup", "ci_low", "ci_high", "significant", "best_candidate",
                         "candidates", "verified_candidates", "elapsed_s", "usd", "tokens", "run_dir", "error"])
    rows = [
        {**row, "key": "openmp/gemm", "task": "tasks/openmp/gemm", "status": "faster", "baseline_s": 0.41, "best_speedup": 2.4,
         "ci_low": 2.1, "ci_high": 2.8, "significant": True, "best_candidate": eval_ids(faster)[1], "candidates": 5,
         "verified_candidates": 3, "elapsed_s": 12.0, "usd": 0.0, "tokens": 0, "run_dir": "runs/openmp__gemm"},
        {**row, "key": "openmp/jacobi2d", "task": "tasks/openmp/jacobi2d", "status": "no_speedup", "baseline_s": 0.3,
         "best_speedup": 1.0, "significant": False, "candidates": 5, "verified_candidates": 3, "elapsed_s": 11.0,
         "run_dir": str(slow)},
        {**row, "key": "openmp/dot", "task": "tasks/openmp/dot", "status": "crashed", "error": f"worker died {PAYLOAD}",
         "run_dir": "runs/openmp__dot"},
    ]
    suite = {"tasks": 3, "finished": 2, "correctness_rate": 2 / 3, "fast_p": {"1.0": 1 / 3, "1.1": 1 / 3, "1.5": 1 / 3, "2.0": 1 / 3},
             "geomean_speedup": 2.4 ** (1 / 3), "candidates": 10, "verified_candidates": 6,
             "spend": {"usd": 0.0, "tokens": 0, "calls": 0}, "elapsed_s": 25.0}
    (bench / "summary.json").write_text(json.dumps({"bench": head, "tasks": rows, "suite": suite}))
    (bench / "results.jsonl").write_text("")
    return bench


def test_bench_report(tmp_path: Path) -> None:
    bench = make_bench(tmp_path)
    p = kernopt("runs", "report", "openmp-tuner", "--benches-dir", str(bench.parent))
    assert p.returncode == 0, p.stderr
    out = Path(p.stdout.strip())
    assert out == bench / "report.html"
    html = out.read_text()
    assert len(re.findall(r"<script\b", html, re.I)) == 1 and PAYLOAD not in html
    # suite figures, and the fast_p curve's marks computed from the rows (1 of 3 tasks faster, at 2.4x)
    assert "1.34×" in html  # geomean
    for mark in ("fast_1 33%", "fast_1.1 33%", "fast_1.5 33%", "fast_2 33%"):
        assert mark in html
    # each task's run, namespaced: no id appears twice on the page
    dom = rendered_dom(out)
    assert_rendered_cleanly(dom)
    ids = re.findall(r'\bid="([^"]+)"', dom)
    assert len(ids) == len(set(ids)), [i for i in ids if ids.count(i) > 1][:5]
    gemm_ids = eval_ids(bench / "runs" / "openmp__gemm")
    assert f'id="t0-c-{gemm_ids[1]}"' in dom and f'id="t1-c-{gemm_ids[1]}"' in dom
    assert 'class="plot fastp"' in dom and dom.count('<details class="task"') == 3
    assert "no run directory found for this task" in dom  # the crashed one
    screenshot(out, "report-bench.png")


# ------------------------------------------------------------------------------ bad input
def test_report_bad_input(hand_run: Path, tmp_path: Path) -> None:
    p = kernopt("runs", "report", "no-such-run", "--runs-dir", str(tmp_path))
    assert p.returncode == 2 and "no run or bench 'no-such-run'" in one_error_line(p)
    (tmp_path / "empty").mkdir()
    p = kernopt("runs", "report", str(tmp_path / "empty"))
    assert p.returncode == 2 and "neither a kernopt run directory" in one_error_line(p)
    p = kernopt("runs", "report", str(hand_run), "-o", str(tmp_path / "no" / "such" / "dir" / "r.html"))
    assert p.returncode == 2 and "cannot write the report" in one_error_line(p)
    p = kernopt("runs", "report", str(hand_run), "-o", str(tmp_path))
    assert p.returncode == 2 and "is a directory" in one_error_line(p)
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "bench.json").write_text("[1, 2")
    p = kernopt("runs", "report", str(tmp_path / "bench"))
    assert p.returncode == 2 and "bench.json is unreadable or invalid" in one_error_line(p)


def test_tree_layout_of_a_deep_lineage() -> None:
    """A chain of 3000 candidates (no recursion limit) and a wide fan-out: one row per leaf."""
    from kernopt.report.svg import TreeNode, lineage_tree

    chain = [TreeNode(id=str(i), label=str(i), cls="ok", tip="", href=f"#{i}", parent=str(i - 1) if i else None) for i in range(3000)]
    svg = lineage_tree(chain)
    assert svg.count("<circle") == 3000 and svg.count('class="edge') == 2999
    fan = [TreeNode(id="r", label="r", cls="baseline", tip="", href="#r", parent=None)]
    fan += [TreeNode(id=f"k{i}", label="", cls="ok", tip="", href="#", parent="r" if i < 40 else "gone") for i in range(41)]
    svg = lineage_tree(fan)
    assert 'height="' + str(30 + 28 * 41) + '"' in svg and svg.count('class="edge orphan"') == 1


def test_a_compiler_build_of_the_same_source_is_not_identical() -> None:
    """The tuner's Polly build differs from its parent in `toolchain` only: diffs and knob lists show it
    (a CI run's `runs diff best baseline` once said "identical" for one)."""
    from kernopt.report.data import candidate_diff, knob_lines

    base = Candidate(files={"k.c": "void f(void) {}\n"}, cflags=["-O3"])
    polly = base.model_copy(update={"toolchain": "polly"})
    assert knob_lines(polly) == ["cflags: -O3", "toolchain: polly"]
    text = candidate_diff(polly, base, "p", "baseline")
    assert "-toolchain: polly" in text.splitlines() and "k.c" not in text
