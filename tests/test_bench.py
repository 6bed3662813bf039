"""`kernopt bench`: discovery, the bench directory, rows and suite figures, the local executor, and the
whole command end to end (parallel jobs, failing and hanging tasks, kill -9 and resume)."""

from __future__ import annotations

import csv
import fcntl
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernopt.bench.local import GpuPool, LocalExecutor
from kernopt.bench.runner import default_name, discover, resources_for
from kernopt.bench.store import BenchItemRef, BenchMeta, BenchStore
from kernopt.bench.summary import Row, make_row, suite_figures
from kernopt.bench.work import ProgressEvent, Resources, WorkItem, WorkResult, run_work_item
from kernopt.config import EvalConfig, RunConfig, SearchConfig
from kernopt.errors import UserError
from tests.conftest import REPO, SMALL_GEMM, needs, reap_zombie_children

SMALL_REDUCTION = REPO / "tests" / "data" / "small_reduction"
# The documented columns of a row (docs/bench-design.md), in order.
DOC_COLUMNS = ["key", "task", "status", "baseline_s", "best_speedup", "ci_low", "ci_high", "significant", "best_candidate", "candidates",
               "verified_candidates", "elapsed_s", "usd", "tokens", "run_dir", "error"]
FAST = ["--sandbox", "local", "--budget", "2", "--set", "eval.rounds=2"]


def kernopt_bench(*args: str, tmp: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kernopt", "bench", *args, "--benches-dir", str(tmp / "benches")], cwd=tmp,
                          capture_output=True, text=True, timeout=timeout, env=bench_env(tmp))


def bench_env(tmp: Path) -> dict[str, str]:
    # A host lock of the test's own: the test's jobs still coordinate their timings through it, but
    # kernopt runs of other test sessions on this machine do not make the test wait.
    return {**os.environ, "KERNOPT_HOST_LOCK": str(tmp / "host.lock")}


def events(run_dir: Path) -> list[dict]:
    out = []
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def eval_ids(run_dir: Path) -> list[str]:
    if not (run_dir / "events.jsonl").exists():
        return []
    return [e["result"]["candidate_id"] for e in events(run_dir) if e["type"] == "eval"]


def one_error_line(p: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert "Traceback" not in p.stderr
    return lines[0]


def expected_geomean(rows: list[dict]) -> float:
    return math.exp(sum(math.log(r["best_speedup"]) if r["status"] == "faster" else 0.0 for r in rows) / len(rows))


# --------------------------------------------------------------------------- figures, by hand
def row(key: str, status: str, speedup: float | None, significant: bool, verified: int) -> Row:
    return Row(key=key, task=f"/t/{key}", status=status, best_speedup=speedup, significant=significant,  # type: ignore[arg-type]
               verified_candidates=verified, candidates=verified + 1, elapsed_s=10.0, usd=0.01, tokens=100, calls=2)


def test_suite_figures_by_hand() -> None:
    rows = [row("a", "faster", 2.5, True, 3), row("b", "faster", 1.2, True, 1), row("c", "faster", 1.1, True, 2),
            row("d", "no_speedup", 1.3, False, 4),  # measured 1.3x but not significant: no win, counts 1.0
            row("e", "no_speedup", 1.0, False, 0), row("f", "failed", None, False, 0)]
    s = suite_figures(rows)
    assert s["tasks"] == 6 and s["finished"] == 5
    assert s["correctness_rate"] == round(4 / 6, 4)
    # fast_p: share of all six (the failed one included) with a significant win above p; 1.1 is not > 1.1
    assert s["fast_p"] == {"1.0": round(3 / 6, 4), "1.1": round(2 / 6, 4), "1.5": round(1 / 6, 4), "2.0": round(1 / 6, 4)}
    assert s["geomean_speedup"] == round((2.5 * 1.2 * 1.1) ** (1 / 6), 4)
    assert s["candidates"] == sum(r.candidates for r in rows) and s["verified_candidates"] == 10
    assert s["spend"] == {"usd": 0.06, "tokens": 600, "calls": 12} and s["elapsed_s"] == 60.0
    assert "calls" not in rows[0].model_dump()  # not a column


def test_suite_figures_no_wins() -> None:
    s = suite_figures([row("a", "failed", None, False, 0), row("b", "timeout", None, False, 0)])
    assert s["fast_p"]["1.0"] == 0.0 and s["geomean_speedup"] == 1.0 and s["correctness_rate"] == 0.0 and s["finished"] == 0


def test_row_from_a_run_log(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()

    def ev(type_: str, cid: str, status: str, base: float | None) -> str:
        timing = {"baseline_median_s": base} if base is not None else None
        return json.dumps({"type": type_, "candidate": {"author": "tuner"}, "result": {"candidate_id": cid, "status": status, "timing": timing}})

    lines = [ev("eval", "c1", "ok", 1.0), ev("eval", "c2", "wrong_answer", None), ev("eval", "c3", "ok", 3.0)]
    (run / "events.jsonl").write_text("\n".join(lines) + "\n{torn")
    summary = {"status": "finished", "best_candidate": "c3", "best_status": "ok", "best_significant": True, "best_speedup": 1.8,
               "best_ci": [1.5, 2.1]}
    r = make_row("s/t", "/t", WorkResult(key="s/t", status="finished", run_dir=str(run), summary=summary, elapsed_s=4.0), run)
    assert (r.status, r.best_speedup, r.ci_low, r.ci_high, r.significant) == ("faster", 1.8, 1.5, 2.1, True)
    assert (r.candidates, r.verified_candidates, r.baseline_s) == (3, 2, 2.0)  # the median of the interleaved baselines
    with open(run / "events.jsonl", "a") as f:
        f.write("\n" + ev("remeasure", "c3", "ok", 2.5) + "\n")
    assert make_row("s/t", "/t", WorkResult(key="s/t", status="finished", run_dir=str(run), summary=summary), run).baseline_s == 2.5
    not_sig = {**summary, "best_significant": False, "best_speedup": 1.1}
    r = make_row("s/t", "/t", WorkResult(key="s/t", status="finished", run_dir=str(run), summary=not_sig), run)
    assert r.status == "no_speedup" and not r.significant
    r = make_row("s/t", "/t", WorkResult(key="s/t", status="timeout", run_dir=str(run), error="killed"), run)
    assert r.status == "timeout" and r.best_speedup is None and r.error == "killed" and r.candidates == 3
    r = make_row("x", "/t", WorkResult(key="x", status="failed", run_dir="", error="bad"), tmp_path / "never-created")
    assert r.status == "failed" and r.candidates == 0 and r.baseline_s is None


# --------------------------------------------------------------------------- discovery and the bench directory
def test_discover_keys_filter_and_duplicates(tmp_path: Path) -> None:
    suite = tmp_path / "tasks" / "openmp"
    for name in ("gemm", "deep/dot"):
        shutil.copytree(SMALL_GEMM, suite / name)
    shutil.copytree(SMALL_GEMM, suite / "gemm" / "data")  # inside a task: its data, not a task
    refs = discover([suite])
    assert [r.key for r in refs] == ["openmp/deep/dot", "openmp/gemm"]
    assert refs[1].task == str((suite / "gemm").resolve())
    assert [r.key for r in discover([suite / "gemm"])] == ["gemm"]  # a task given itself
    assert [r.key for r in discover([suite], "dot$")] == ["openmp/deep/dot"]
    other = tmp_path / "elsewhere" / "openmp"
    shutil.copytree(SMALL_GEMM, other / "gemm")
    with pytest.raises(UserError, match="two tasks with the key 'openmp/gemm'"):
        discover([suite, other])
    with pytest.raises(UserError, match="matches none"):
        discover([suite], "nothing")
    with pytest.raises(UserError, match="not a valid regular expression"):
        discover([suite], "(")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UserError, match="no task.toml"):
        discover([empty])
    with pytest.raises(UserError, match="no such"):
        discover([tmp_path / "missing"])
    assert default_name([suite], "tuner") == "openmp-tuner"
    assert default_name([suite, tmp_path / "mpi"], "llm") == "openmp+mpi-llm"


def test_resources_per_task(tmp_path: Path) -> None:
    assert resources_for(str(SMALL_GEMM)) == Resources(cpus=2, gpus=0)  # timing.threads = 2
    assert resources_for(str(REPO / "tasks" / "mpi" / next(p.name for p in (REPO / "tasks" / "mpi").iterdir()
                                                             if (p / "task.toml").is_file()))).cpus >= 2
    assert resources_for(str(REPO / "tests" / "data" / "softmax_rows"), "h100") == Resources(cpus=1, gpus=1, hardware="h100")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "task.toml").write_text("not = [valid")
    assert resources_for(str(broken)) == Resources()


def meta(tmp_path: Path, budget: int = 2, keys: tuple[str, ...] = ("s/a", "s/b")) -> BenchMeta:
    config = RunConfig(task="", sandbox="local", search=SearchConfig(max_candidates=budget), runs_dir=tmp_path / "b" / "runs")
    return BenchMeta(name="b", run_config=config, items=[BenchItemRef(key=k, task=f"/t/{k}") for k in keys])


def test_bench_store_refuses_another_configuration_and_a_second_writer(tmp_path: Path) -> None:
    root = tmp_path / "b"
    store = BenchStore.open(root, meta(tmp_path))
    with pytest.raises(UserError, match="being run by another kernopt process"):
        BenchStore.open(root, meta(tmp_path))
    store.append_result(WorkResult(key="s/a", status="failed", run_dir="x", error="first"))
    with open(root / "results.jsonl", "a") as f:
        f.write('{"key": "s/a", "sta')  # torn by a kill
    store.append_result(WorkResult(key="s/a", status="finished", run_dir="x"))
    store.append_result(WorkResult(key="s/b", status="timeout", run_dir="y"))
    store.close()
    assert {k: r.status for k, r in BenchStore.read(root).latest().items()} == {"s/a": "finished", "s/b": "timeout"}
    with pytest.raises(UserError, match=r"search\.max_candidates: 2 there, 5 now") as e:
        BenchStore.open(root, meta(tmp_path, budget=5))
    assert "\n" not in str(e.value)
    with pytest.raises(UserError, match="tasks not in it: s/c; tasks missing now: s/b"):
        BenchStore.open(root, meta(tmp_path, keys=("s/a", "s/c")))
    again = BenchStore.open(root, meta(tmp_path))  # the same configuration: reopened, bench.json kept
    assert again.meta.created == json.loads((root / "bench.json").read_text())["created"]
    again.close()


# --------------------------------------------------------------------------- the local executor
def test_gpu_pool() -> None:
    pool = GpuPool(["0", "1"])
    assert pool.take(1) == ["0"] and pool.take(2) is None and pool.take(1) == ["1"] and pool.take(1) is None
    pool.give(["0"])
    assert pool.take(1) == ["0"]
    item = WorkItem(key="k", config=RunConfig(task="t"), run_dir="r", resources=Resources(gpus=1))
    assert pool.need(item) == 1 and GpuPool([]).need(item) == 0  # no GPUs here: GPU tasks run untimed


def broken_task(tmp_path: Path, name: str = "broken") -> Path:
    d = tmp_path / name
    shutil.copytree(SMALL_GEMM, d)
    with open(d / "task.toml", "a") as f:
        f.write("\nthis is = not [toml\n")
    return d


def test_local_executor_gives_gpus_exclusively(tmp_path: Path) -> None:
    task = broken_task(tmp_path)  # fails at once in its worker: the test is about placement
    items = [WorkItem(key=k, config=RunConfig(task=str(task), sandbox="local"), run_dir=str(tmp_path / "runs" / k),
                      resources=Resources(gpus=g)) for k, g in (("g1", 1), ("g2", 1), ("two", 2), ("cpu", 0))]
    log: list[tuple[str, str, str]] = []  # (what, key, detail) in the order the executor reported them
    LocalExecutor(jobs=3, gpus=["3"]).run(
        items, lambda e: log.append((e.kind, e.key, e.text)), lambda r: log.append(("result", r.key, f"{r.status} {r.error}")))
    results = {k: detail for what, k, detail in log if what == "result"}
    assert results["two"] == "failed needs 2 GPUs; this machine has 1"
    assert results["g1"].startswith("failed") and "not valid TOML" in results["g1"]
    starts = {k: (i, detail) for i, (what, k, detail) in enumerate(log) if what == "start"}
    ends = {k: i for i, (what, k, _) in enumerate(log) if what == "result"}
    assert starts["g1"][1] == starts["g2"][1] == "gpus 3"  # CUDA_VISIBLE_DEVICES in the worker
    assert starts["cpu"][1] != "gpus 3"
    assert ends["g1"] < starts["g2"][0] or ends["g2"] < starts["g1"][0], f"two items held the one GPU at once: {log}"


@needs("gcc", "clang")
@pytest.mark.slow
def test_worker_killed_is_crashed_then_resumed_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNOPT_HOST_LOCK", str(tmp_path / "host.lock"))
    runs = tmp_path / "runs"
    config = RunConfig(task=str(SMALL_GEMM), sandbox="local", search=SearchConfig(max_candidates=3), eval=EvalConfig(rounds=2), runs_dir=runs)
    item = WorkItem(key="gemm", config=config, run_dir=str(runs / "gemm"))
    got: list[WorkResult] = []

    def on_event(e: ProgressEvent) -> None:
        if e.kind == "eval":  # the worker is mid-run: kill it (only it, as the OOM killer would)
            for pid in _children("kernopt.bench.worker"):
                os.kill(pid, signal.SIGKILL)

    LocalExecutor(jobs=1).run([item], on_event, got.append)
    assert len(got) == 1 and got[0].status == "crashed" and "killed by SIGKILL" in got[0].error, got
    before = eval_ids(runs / "gemm")
    assert 1 <= len(before) < 3
    seen: list[ProgressEvent] = []
    result = run_work_item(item, seen.append)  # the same worker body, in this process: resumes the run
    assert result.status == "finished" and result.summary is not None and result.summary["candidates"] == 3, result
    after = eval_ids(runs / "gemm")
    assert after[: len(before)] == before and len(after) == len(set(after)) == 3
    assert any("resuming" in e.text for e in seen) and [e.done for e in seen if e.kind == "eval"] == [1, 2, 3]
    size = (runs / "gemm" / "events.jsonl").stat().st_size
    again = run_work_item(item, seen.append)  # finished: the summary at once, nothing run
    assert again.status == "finished" and again.summary == result.summary
    assert (runs / "gemm" / "events.jsonl").stat().st_size == size
    reap_zombie_children()


def _children(marker: str) -> list[int]:
    out = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
            cmd = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(stat[1]) == os.getpid() and marker in cmd:
            out.append(int(name))
    return out


def test_run_work_item_never_raises_for_a_broken_task(tmp_path: Path) -> None:
    item = WorkItem(key="b", config=RunConfig(task=str(broken_task(tmp_path)), sandbox="local"), run_dir=str(tmp_path / "runs" / "b"))
    r = run_work_item(item, lambda e: None)
    assert r.status == "failed" and "not valid TOML" in r.error and "\n" not in r.error and r.host


# --------------------------------------------------------------------------- `kernopt bench` end to end
@needs("gcc", "clang")
@pytest.mark.slow
def test_two_tasks_in_parallel_then_nothing_rerun(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    shutil.copytree(SMALL_GEMM, suite / "gemm")
    shutil.copytree(SMALL_REDUCTION, suite / "reduction")
    p = kernopt_bench(str(suite), "--jobs", "2", "--json", *FAST, tmp=tmp_path)
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    bench = tmp_path / "benches" / "suite-tuner"
    assert summary == json.loads((bench / "summary.json").read_text())
    rows = summary["tasks"]
    assert [r["key"] for r in rows] == ["suite/gemm", "suite/reduction"]
    for r in rows:
        assert list(r) == DOC_COLUMNS
        assert r["status"] in ("faster", "no_speedup") and r["candidates"] == 2 and r["error"] == ""
        assert r["baseline_s"] is not None and r["baseline_s"] > 0 and r["best_speedup"] is not None
    with open(bench / "summary.csv", newline="") as f:
        table = list(csv.reader(f))
    assert table[0] == DOC_COLUMNS and [t[0] for t in table[1:]] == ["suite/gemm", "suite/reduction"]
    s = summary["suite"]
    assert s["tasks"] == 2 and s["finished"] == 2 and set(s["fast_p"]) == {"1.0", "1.1", "1.5", "2.0"}
    assert s["fast_p"]["1.0"] == sum(1 for r in rows if r["status"] == "faster") / 2
    assert s["geomean_speedup"] == round(expected_geomean(rows), 4)
    assert summary["bench"]["run_config"]["search"]["max_candidates"] == 2 and "items" not in summary["bench"]
    # --jobs 2: the two runs overlapped in time
    spans = [(events(bench / "runs" / n)[0]["t"], events(bench / "runs" / n)[-1]["t"]) for n in ("suite__gemm", "suite__reduction")]
    assert spans[0][0] < spans[1][1] and spans[1][0] < spans[0][1], spans

    # A finished item counts as finished without its results.jsonl line (killed in between): not rerun.
    results = bench / "results.jsonl"
    results.write_text("".join(ln + "\n" for ln in results.read_text().splitlines() if '"suite/gemm"' not in ln))
    logs = {n: (bench / "runs" / n / "events.jsonl").read_bytes() for n in ("suite__gemm", "suite__reduction")}
    again = kernopt_bench(str(suite), "--jobs", "2", *FAST, tmp=tmp_path)
    assert again.returncode == 0, again.stderr
    assert all((bench / "runs" / n / "events.jsonl").read_bytes() == log for n, log in logs.items())
    assert again.stderr.count("finished before; skipped") == 2
    assert "fast_1.0" in again.stdout and "geomean" in again.stdout and "summary.csv" in again.stdout
    assert {json.loads(ln)["key"] for ln in results.read_text().splitlines()} == {"suite/gemm", "suite/reduction"}
    assert [r["key"] for r in json.loads((bench / "summary.json").read_text())["tasks"]] == ["suite/gemm", "suite/reduction"]


@needs("gcc", "clang")
@pytest.mark.slow
def test_failing_and_hanging_tasks_do_not_stop_the_others(tmp_path: Path) -> None:
    suite = tmp_path / "s"
    shutil.copytree(SMALL_REDUCTION, suite / "a_good")  # not a matrix product: its Polly build takes no 23 s
    hang = suite / "b_hang"
    shutil.copytree(SMALL_GEMM, hang)  # its baseline never returns: the item outlives --task-timeout
    src = (hang / "kernel.c").read_text()
    (hang / "kernel.c").write_text(src.replace("{\n", "{\n    while (n > 0) { c[0] += 1.0; }\n", 1))
    broken_task(suite, "c_broken")
    nocompile = suite / "d_nocompile"
    shutil.copytree(SMALL_GEMM, nocompile)
    with open(nocompile / "kernel.c", "a") as f:
        f.write("\nthis does not compile;\n")
    t0 = time.monotonic()
    p = kernopt_bench(str(suite), "--task-timeout", "20", "--json", *FAST, tmp=tmp_path)
    assert p.returncode == 1, p.stderr  # some did not finish; the summary is still written
    assert time.monotonic() - t0 < 120
    rows = {r["key"]: r for r in json.loads(p.stdout)["tasks"]}
    assert rows["s/a_good"]["status"] in ("faster", "no_speedup") and rows["s/a_good"]["candidates"] == 2
    assert rows["s/b_hang"]["status"] == "timeout" and "20s" in rows["s/b_hang"]["error"]
    assert rows["s/c_broken"]["status"] == "failed" and "not valid TOML" in rows["s/c_broken"]["error"]
    assert rows["s/d_nocompile"]["status"] == "failed" and "does not compile" in rows["s/d_nocompile"]["error"]
    assert all("\n" not in r["error"] for r in rows.values())
    s = json.loads(p.stdout)["suite"]
    assert s["tasks"] == 4 and s["finished"] == 1
    assert s["fast_p"]["1.0"] == (0.25 if rows["s/a_good"]["status"] == "faster" else 0.0)
    assert "\n✗ s/b_hang: timeout" in "\n" + p.stderr


@needs("gcc", "clang")
@pytest.mark.slow
def test_kill_the_bench_and_run_it_again(tmp_path: Path) -> None:
    """CHAOS: SIGKILL `kernopt bench` (its whole process group) with one item finished and one mid-run."""
    suite = tmp_path / "suite"
    shutil.copytree(SMALL_GEMM, suite / "a")
    shutil.copytree(SMALL_GEMM, suite / "b")
    args = ["-m", "kernopt", "bench", str(suite), "--jobs", "1", "--sandbox", "local", "--budget", "3", "--set", "eval.rounds=2",
            "--benches-dir", str(tmp_path / "benches")]
    runs = tmp_path / "benches" / "suite-tuner" / "runs"
    proc = subprocess.Popen([sys.executable, *args], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, env=bench_env(tmp_path))
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        a_done = (runs / "suite__a" / "summary.json").exists()
        if a_done and len(eval_ids(runs / "suite__b")) >= 1:
            break
        assert proc.poll() is None, "the bench ended before it could be killed"
        time.sleep(0.05)
    else:
        pytest.fail("no progress within the deadline")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    _wait_unlocked(runs / "suite__b" / ".lock")  # its worker died with the bench (PR_SET_PDEATHSIG) and let go of the run
    a_log = (runs / "suite__a" / "events.jsonl").read_bytes()
    b_before = eval_ids(runs / "suite__b")
    assert 1 <= len(b_before) < 3
    assert json.loads((runs / "suite__a" / "summary.json").read_text())["status"] == "finished"

    p = subprocess.run([sys.executable, *args, "--json"], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=bench_env(tmp_path))
    assert p.returncode == 0, p.stderr
    assert (runs / "suite__a" / "events.jsonl").read_bytes() == a_log, "a finished item was run again"
    assert "suite/a: finished before; skipped" in p.stderr
    b_after = eval_ids(runs / "suite__b")
    assert b_after[: len(b_before)] == b_before and len(b_after) == len(set(b_after)) == 3, "not resumed: candidates evaluated again"
    assert "resume" in [e["type"] for e in events(runs / "suite__b")]
    summary = json.loads(p.stdout)
    assert [r["key"] for r in summary["tasks"]] == ["suite/a", "suite/b"]
    assert all(r["status"] in ("faster", "no_speedup") and r["candidates"] == 3 for r in summary["tasks"])
    with open(runs.parent / "summary.csv", newline="") as f:
        assert [r[0] for r in csv.reader(f)] == ["key", "suite/a", "suite/b"]

    refused = subprocess.run([sys.executable, *[a if a != "3" else "4" for a in args]], cwd=tmp_path, capture_output=True, text=True,
                             timeout=120, env=bench_env(tmp_path))
    assert refused.returncode == 2
    assert "search.max_candidates: 3 there, 4 now" in one_error_line(refused)
    reap_zombie_children()


def _wait_unlocked(lock: Path, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    fd = os.open(lock, os.O_RDWR)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(fd, fcntl.LOCK_UN)
                return
            except BlockingIOError:
                assert time.monotonic() < end, f"{lock} still held: a worker outlived the killed bench"
                time.sleep(0.1)
    finally:
        os.close(fd)


def test_bench_user_errors(tmp_path: Path) -> None:
    p = kernopt_bench(str(tmp_path / "missing"), *FAST, tmp=tmp_path)
    assert p.returncode == 2 and "no such task or suite directory" in one_error_line(p)
    shutil.copytree(SMALL_GEMM, tmp_path / "s" / "gemm")
    p = kernopt_bench(str(tmp_path / "s"), "--filter", "nope", *FAST, tmp=tmp_path)
    assert p.returncode == 2 and "matches none" in one_error_line(p)
    p = kernopt_bench(str(tmp_path / "s"), "--executor", "slurm", *FAST, tmp=tmp_path)
    assert p.returncode == 2 and "unknown executor" in one_error_line(p)
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        p = kernopt_bench(str(tmp_path / "s"), "--executor", "ray", *FAST, tmp=tmp_path)
        assert p.returncode == 2 and "pip install 'kernopt[ray]'" in one_error_line(p)
        assert not (tmp_path / "benches").exists()  # nothing created for a bench that cannot run
