"""bench/peers.py and bench/quality.py: the trusted compiler hook (c_family.Toolchain), peers giving wrong
answers shown as wrong, the statistics behind the tables, and both scripts end to end on a small task."""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kernopt import placement
from kernopt.candidate import Candidate
from kernopt.evaluators import stats
from kernopt.evaluators.base import EvalFail
from kernopt.evaluators.c_family.evaluator import CFamilyEvaluator, Toolchain
from kernopt.task import load_task
from tests.conftest import REPO, needs

sys.path.insert(0, str(REPO / "bench"))
import peers  # noqa: E402
import quality  # noqa: E402

GUARD = '#ifndef KO_PEER_MARK\n#error "built without the peer flags"\n#endif\n'


def _breakable(task_dir: Path) -> None:
    """The baseline (built by the task's flags) stays correct; built with a marker it is wrong everywhere, or
    only at the timing size (160), which no verification size reaches (check sizes up to 64, drawn ones 65-100)."""
    src = (task_dir / "kernel.c").read_text()
    body_end = src.rstrip().rfind("}")
    (task_dir / "kernel.c").write_text(src[:body_end] + "#ifdef KO_PEER_BREAK\n    c[0] += 1.0;\n#endif\n"
                                       "#ifdef KO_PEER_BREAK_LARGE\n    if (n >= 150) c[n * n - 1] *= 1.001;\n#endif\n}\n")


def _comment(binary: Path) -> str:
    return subprocess.run(["readelf", "-p", ".comment", str(binary)], capture_output=True, text=True, check=True).stdout


pytestmark = pytest.mark.usefixtures("private_host_lock")  # results, not timings: no queueing behind other work


@pytest.fixture
def evaluator(small_evaluator: CFamilyEvaluator) -> CFamilyEvaluator:
    return small_evaluator


# ---------------------------------------------------------------- the build hook
@needs("gcc", "clang", "readelf")
def test_toolchain_builds_the_kernel_with_its_own_compiler_and_flags(evaluator: CFamilyEvaluator) -> None:
    task = evaluator.task
    guarded = Candidate(files={task.kernel: GUARD + task.baseline_source()})
    with pytest.raises(EvalFail, match="does not compile"):
        evaluator.build(guarded)  # without the toolchain the marker is not defined
    prog, log = evaluator.build_with(guarded, Toolchain("clang", ("-DKO_PEER_MARK=1",)))
    assert log.startswith("$ clang ") and "-DKO_PEER_MARK=1" in log.splitlines()[0]
    assert "clang version" in _comment(prog)  # the kernel object really came from clang
    assert "clang version" not in _comment(evaluator.baseline_binary())  # the baseline stays the task's gcc build

    autopar, _ = evaluator.build_with(Candidate(files={task.kernel: task.baseline_source()}),
                                      Toolchain("gcc", ("-ftree-parallelize-loops=2",), ("-lgomp",)))
    assert peers.parallel_loops(autopar) >= 1 and peers.parallel_loops(evaluator.baseline_binary()) == 0

    result, binary = evaluator.check_untimed(guarded, Toolchain("gcc", ("-DKO_PEER_MARK=1",)))
    assert result.status == "ok" and result.timing is None and binary is not None and binary.is_file()
    assert result.verification.threads == task.verify.threads and result.verification.seeds >= 5


def test_toolchain_flags_are_not_a_candidate_s_flags(evaluator: CFamilyEvaluator) -> None:
    """The gate still refuses the same flags from a candidate: only the trusted hook can pass them."""
    polly = Candidate(files={evaluator.task.kernel: evaluator.task.baseline_source()}, cflags=["-mllvm", "-polly"])
    result = evaluator.evaluate(polly)
    assert result.status == "rejected" and "not allowed" in result.reason
    result, binary = evaluator.check_untimed(polly, Toolchain("gcc"))
    assert result.status == "rejected" and binary is None


# ---------------------------------------------------------------- wrong peers
def _args(tmp_path: Path, rounds: int = 2) -> argparse.Namespace:
    return argparse.Namespace(cores=2, budget=0, tuner_runs=None, rounds=rounds, reps=None, runs_dir=tmp_path / "runs")


@needs("gcc")
def test_a_peer_giving_a_wrong_answer_is_shown_as_wrong(small_task: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _breakable(small_task)
    task = load_task(small_task)
    monkeypatch.setattr(peers, "peer_toolchains", lambda task, cores: [
        ("native", "-O3 -march=native", Toolchain("gcc", ("-march=native",))),
        ("broken", "wrong everywhere", Toolchain("gcc", ("-DKO_PEER_BREAK",))),
        ("late", "wrong at the timing size", Toolchain("gcc", ("-DKO_PEER_BREAK_LARGE",)))])
    held: list[str] = []
    real_hold = placement.hold
    monkeypatch.setattr(placement, "hold", lambda mode, *a, **k: held.append(mode) or real_hold(mode, *a, **k))
    log: list[str] = []
    variants = peers.run_task(task, _args(tmp_path), None, log)
    # checks beside other work, then the timing loop alone (each evaluation's sandbox is removed under a shared hold)
    assert "exclusive" in held and "shared" in held[:held.index("exclusive")]
    assert variants["native"].status == "ok" and len(variants["native"].groups) == 2
    assert variants["broken"].status == "wrong_answer" and not variants["broken"].groups
    assert variants["late"].status == "wrong_answer" and "timed run" in variants["late"].reason  # caught by the timed-output check
    assert variants["kernopt"].status == "not run"
    lines = peers.table({"openmp/small_gemm": variants})
    row, geo = lines[2], lines[3]
    assert row.count("**wrong answer**") == 2 and "not run" in row
    assert "0/1 verified" in geo and "**1.00x** (1.00–1.00)" in geo  # a wrong peer counts as no speedup
    assert any("wrong everywhere: wrong_answer" in x for x in log)


# ---------------------------------------------------------------- statistics
def _const(value: float, rounds: int = 5, reps: int = 3) -> list[list[float]]:
    return [[value] * reps for _ in range(rounds)]


def test_geomean_and_its_interval() -> None:
    g, lo, hi = peers.geomean_ci([(_const(2.0), _const(1.0)), (_const(8.0), _const(1.0))])
    assert (g, lo, hi) == pytest.approx((4.0, 4.0, 4.0))
    g, lo, hi = peers.geomean_ci([(_const(2.0), _const(1.0)), (_const(8.0), _const(1.0)), None])
    assert (g, lo, hi) == pytest.approx((16 ** (1 / 3),) * 3)
    rng = np.random.default_rng(3)

    def noisy(v: float) -> list[list[float]]:
        return [list(v * np.exp(rng.normal(0, 0.05, 3))) for _ in range(7)]

    pairs = [(noisy(3.0), noisy(1.0)), (noisy(1.0), noisy(1.0))]
    g, lo, hi = peers.geomean_ci(pairs)
    assert lo < g < hi and lo > 1.4 and hi < 2.1 and g == pytest.approx(math.sqrt(3.0), rel=0.1)
    # one task: the geometric mean's interval is the task's own (the same bootstrap seed as its table cell)
    assert peers.geomean_ci(pairs[:1]) == pytest.approx(stats.ratio_of_medians(*pairs[0], seed=0))
    with pytest.raises(ValueError):
        peers.geomean_ci([])


def test_reach_counts_significant_wins_and_names_slower_bests() -> None:
    rng = np.random.default_rng(4)

    def noisy(v: float) -> list[list[float]]:
        return [list(v * np.exp(rng.normal(0, 0.02, 3))) for _ in range(7)]

    def task(base: float, tuned: float, status: str = "ok") -> dict[str, peers.Variant]:
        return {peers.BASE: peers.Variant(peers.BASE, "serial -O3", groups=noisy(base)),
                "kernopt": peers.Variant("kernopt", "kernopt tuner", status=status, groups=noisy(tuned))}

    results = {"a": task(3.0, 1.0), "b": task(1.6, 1.0), "c": task(1.2, 1.0), "d": task(1.0, 1.3), "e": task(4.0, 1.0, "wrong_answer")}
    reached, slower = peers.reach(results)
    assert "2 of 5 (40%; misses" in reached  # a and b; c is below 1.5x, d slower, e did not verify
    assert "d 0.77x" in slower and "a " not in slower
    results = {k: results[k] for k in ("a", "b")}
    assert "2 of 2 (100%; meets" in peers.reach(results)[0] and peers.reach(results)[1].endswith("none.")


def test_bootstrap_ratios_is_ratio_of_medians_distribution() -> None:
    rng = np.random.default_rng(1)
    b, c = [list(rng.lognormal(0, 0.1, 3)) for _ in range(6)], [list(rng.lognormal(-0.5, 0.1, 3)) for _ in range(6)]
    point, lo, hi = stats.ratio_of_medians(b, c, seed=5)
    assert (lo, hi) == pytest.approx(tuple(np.quantile(stats.bootstrap_ratios(b, c, seed=5), [0.025, 0.975])))
    assert lo < point < hi


def test_judge_is_the_evaluator_rule() -> None:
    rng = np.random.default_rng(2)

    def noisy(v: float, rounds: int) -> list[list[float]]:
        return [list(v * np.exp(rng.normal(0, 0.03, 3))) for _ in range(rounds)]

    assert peers.judge(noisy(2.0, 5), noisy(1.0, 5)).significant
    assert not peers.judge(noisy(2.0, 2), noisy(1.0, 2)).significant  # too few processes for a 1% rank test
    assert not peers.judge(noisy(1.0, 7), noisy(1.0, 7)).significant


def test_clopper_pearson_and_cv() -> None:
    assert quality.clopper_pearson(0, 100) == pytest.approx((0.0, 1 - 0.025 ** (1 / 100)))
    assert quality.clopper_pearson(1, 100) == pytest.approx((0.000253, 0.054459), abs=1e-6)
    assert quality.clopper_pearson(100, 100) == pytest.approx((0.025 ** (1 / 100), 1.0))
    n = quality.zero_fail_n(0.01)
    assert quality.clopper_pearson(0, n)[1] <= 0.01 < quality.clopper_pearson(0, n - 1)[1]
    with pytest.raises(ValueError):
        quality.clopper_pearson(3, 2)
    assert quality.cv([1.0, 1.0]) == 0.0 and quality.cv([1.0, 3.0]) == pytest.approx(math.sqrt(2) / 2)


def test_update_markdown_replaces_its_own_section_only(tmp_path: Path) -> None:
    doc = tmp_path / "b.md"
    doc.write_text("# Benchmarks\n\nintro\n<!-- peers:begin -->\nold\n<!-- peers:end -->\n\ntail\n")
    peers.update_markdown(doc, "peers", "new table")
    peers.update_markdown(doc, "quality", "quality tables")
    peers.update_markdown(doc, "quality", "quality tables, again")
    text = doc.read_text()
    assert "old" not in text and "intro" in text and "tail" in text and text.count("new table") == 1
    assert text.count("<!-- quality:begin -->") == 1 and "quality tables, again" in text and "quality tables\n" not in text


def test_tuner_candidate_from_a_run_directory(small_task: Path, tmp_path: Path) -> None:
    from kernopt.config import RunConfig
    from kernopt.evaluators.result import EvalResult
    from kernopt.runs import RunStore

    task = load_task(small_task)
    best = Candidate(files={task.kernel: "#include <omp.h>\n" + task.baseline_source()}, threads=2, idea="an idea", author="tuner")
    store = RunStore.create(RunConfig(task=str(small_task), runs_dir=tmp_path / "runs"), task.name)
    store.write_best(best, EvalResult(candidate_id=best.id, status="ok"))
    store.close()
    got, note = peers.tuner_candidate(task, small_task, 0, tmp_path / "runs", tmp_path)
    assert got == best and "budget 20" in note
    assert peers.tuner_candidate(load_task(REPO / "tasks/openmp/gemm"), REPO / "tasks/openmp/gemm", 0, tmp_path / "runs", tmp_path)[0] is None


# ---------------------------------------------------------------- end to end
SMALL_REDUCTION = REPO / "tests" / "data" / "small_reduction"  # Polly compiles it in a second (gemm: 30-60 s)


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *cmd], capture_output=True, text=True, cwd=REPO, timeout=300)


@pytest.mark.slow
@needs("gcc", "clang")
def test_peers_end_to_end(tmp_path: Path) -> None:
    doc, saved, runs = tmp_path / "benchmarks.md", tmp_path / "r.json", tmp_path / "runs"
    p = _run("bench/peers.py", "--tasks", str(SMALL_REDUCTION), "--rounds", "2", "--budget", "1", "--runs-dir", str(runs),
             "--markdown", str(doc), "--save", str(saved))
    assert p.returncode == 0, p.stderr[-2000:]
    row = next(ln for ln in p.stdout.splitlines() if ln.startswith("| data/small_reduction"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[7:] in ([], ["–"]) and float(cells[1]) > 0  # roofline column: the task declares no [roofline] work
    polly = peers.polly_problem()
    for c in cells[2:7]:
        assert (re.fullmatch(r"\d+\.\d\dx \(\d+\.\d\d–\d+\.\d\d\)\*?( \(no parallel loop\))?", c) or (c == "unavailable" and polly)
                or c == "**wrong answer**"), row
    data = json.loads(saved.read_text())["tasks"]["data/small_reduction"]
    assert len(data["serial"]["groups"]) == 2 and data["autopar"]["toolchain"][0] == "gcc"
    assert "-ftree-parallelize-loops=" in " ".join(data["autopar"]["toolchain"])
    assert isinstance(data["autopar"]["parallel_loops"], int) and data["native"]["parallel_loops"] is None
    assert ("(no parallel loop)" in cells[3]) == (data["autopar"]["parallel_loops"] == 0)
    assert "-floop-nest-optimize" in data["graphite"]["toolchain"] and isinstance(data["graphite"]["parallel_loops"], int)
    text = doc.read_text()
    assert "<!-- peers:begin -->" in text and "| data/small_reduction |" in text and "tuner budget 1" in text
    # the tuner's best again, taken from the run directory this time
    p = _run("bench/peers.py", "--tasks", str(SMALL_REDUCTION), "--rounds", "2", "--tuner-runs", str(runs))
    assert p.returncode == 0, p.stderr[-2000:]
    assert "budget 1, run " in p.stdout


@pytest.mark.slow
@needs("gcc")
def test_quality_end_to_end(small_task: Path, tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    p = _run("bench/quality.py", "--tasks", str(small_task), "--repeats", "2", "--cv-rounds", "2", "--cv-reps", "2", "--markdown", str(doc))
    assert p.returncode == 0, p.stderr[-2000:]
    assert "false wins in 2 A/A evaluations" in p.stdout and "Clopper-Pearson" in p.stdout
    assert "| openmp/small_gemm | 2 |" in p.stdout  # the A/A row: two evaluations
    overhead = p.stdout.split("Evaluator overhead")[1].splitlines()[4]  # the table's first row: heading, blank, header, rule
    assert overhead.startswith("| openmp/small_gemm |")
    share, without_warmup = (float(c.strip().rstrip("%")) for c in overhead.split("|")[-3:-1])
    assert 0 < without_warmup <= share < 100
    assert "CV within a process" in p.stdout and "<!-- quality:begin -->" in doc.read_text()
    p = _run("bench/aa_check.py", "--tasks", str(small_task), "--repeats", "1")  # the old name: A/A and overhead only
    assert p.returncode == 0, p.stderr[-2000:]
    assert "false wins in 1 A/A evaluations" in p.stdout and "CV within" not in p.stdout


def test_peers_refuses_mpi_tasks(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="OpenMP/serial C tasks"):
        peers.run_task(load_task(REPO / "tasks/mpi/dot"), _args(tmp_path), None, [])


def test_roofline_fraction(small_task: Path) -> None:
    from kernopt.hw.probe import HardwareProfile, HostFingerprint

    with open(small_task / "task.toml", "a") as f:
        f.write('\n[roofline]\nflops = "2*n^3"\nbytes = "3*8*n^2"\n')
    task = load_task(small_task)  # timing size 160: 8.192e6 flops, 614400 bytes
    fp = HostFingerprint(cpu_model="test", cores=2, memory_mb=1, kernel="k", sandbox="local", compiler="gcc")
    profile = HardwareProfile(fingerprint=fp, bandwidth_gbps={2: 10.0}, peak_gflops={2: 10.0}, llc_bytes=0, array_bytes=1, reps=1,
                              vector_bits=512, measured_at="now", probe_s=0.0)
    variants = {peers.BASE: peers.Variant(peers.BASE, "serial", groups=_const(0.1)),
                "kernopt": peers.Variant("kernopt", "kernopt", groups=_const(0.05))}
    # compute-bound: 8.192e6 / 10e9 = 0.82 ms of compute against 61 us of memory traffic
    assert peers.roofline_figures(task, variants, profile)[0] == "serial 0.819% → kernopt 1.64% (compute-bound)"
    variants["kernopt"].status = "wrong_answer"
    assert peers.roofline_figures(task, variants, profile)[0] == "serial 0.819% (compute-bound)"
    assert peers.roofline_figures(task, variants, None)[0] == "–"


def test_verdict_reads_the_two_speed_checks_off_the_table() -> None:
    """The tuner's geometric mean over the best auto-parallelizer's (a failed program counts 1.00x), and the
    compute-bound tasks' tuner speedups against 1.7x."""
    def row(autopar: float, polly: float | None, tuner: float) -> dict[str, peers.Variant]:
        return {peers.BASE: peers.Variant(peers.BASE, "serial", groups=_const(1.0)),
                "autopar": peers.Variant("autopar", "gcc autopar (2)", groups=_const(1.0 / autopar)),
                "polly": peers.Variant("polly", "clang Polly parallel", groups=_const(1.0 / polly) if polly else [],
                                       status="ok" if polly else "wrong_answer"),
                "kernopt": peers.Variant("kernopt", "kernopt tuner", groups=_const(1.0 / tuner))}

    results = {"openmp/a": row(2.0, 4.0, 8.0), "openmp/b": row(1.5, None, 1.6)}
    # geometric means: autopar sqrt(3) = 1.73, Polly sqrt(4 * 1) = 2.00, tuner sqrt(12.8) = 3.58 -> 1.79x Polly's
    lines = peers.verdict(results, {"openmp/a": ("compute", 0.2), "openmp/b": ("memory", 0.5)})
    assert lines[0] == ("- **Tuner against the best auto-parallelizer:** geometric mean 3.58x against clang Polly parallel's 2.00x: "
                        "**1.79x** (meets the target of at least 1.5x).")
    assert lines[1:3] == peers.reach(results)  # issue 17's suite checks (test_reach_counts_...)
    assert lines[3] == "- **openmp/a** (compute-bound): tuner 8.00x, at least 1.7x (85% of the 2-core ceiling); at 20% of the compute roof."
    assert len(lines) == 4  # openmp/b is memory-bound: not one of the compute-bound tasks
    lines = peers.verdict({"openmp/a": row(2.0, 4.0, 1.5)}, {"openmp/a": ("compute", 0.05)})
    assert "**0.38x** (misses" in lines[0] and "tuner 1.50x, below 1.7x" in lines[3]


def test_a_bench_run_from_another_checkout_is_the_same_task(tmp_path: Path) -> None:
    # a bench run from a frozen worktree records that worktree's task path: the same suite/name with byte-identical
    # files is the same task; a changed file or another suite's task of that name is not
    here, there, other = tmp_path / "a/tasks/loops/k", tmp_path / "b/tasks/loops/k", tmp_path / "b/tasks/openmp/k"
    for d in (here, there, other):
        d.mkdir(parents=True)
        (d / "kernel.c").write_text("void k(void) {}\n")
        (d / "task.toml").write_text("name = 'k'\n")
    assert peers.same_task(str(there), here) and peers.same_task(str(here), here)
    assert not peers.same_task(str(other), here)
    (there / "kernel.c").write_text("void k(void) { }\n")
    assert not peers.same_task(str(there), here)
