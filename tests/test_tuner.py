"""The offline tuner policy (kernopt.tuner.policy): moves, prior, dedup, and that every kernel compiles."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kernopt.agent.base import SearchState
from kernopt.candidate import Candidate
from kernopt.config import EvalConfig
from kernopt.errors import TaskError
from kernopt.evaluators.c_family.evaluator import CFamilyEvaluator
from kernopt.evaluators.result import EvalResult, Roofline, TimingStats
from kernopt.sandbox import get_sandbox
from kernopt.task import Task, Tunable, load_task
from kernopt.tuner.policy import TunerPolicy
from tests.conftest import enterable_tmpdir

ROOT = Path(__file__).resolve().parents[1]
HEADERS = ROOT / "kernopt/evaluators/c_family/c"
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")


def _loadable(target: str) -> list[Path]:
    out = []
    for d in sorted((ROOT / "tasks" / target).glob("*/")):
        try:
            load_task(d)
            out.append(d)
        except TaskError:  # tasks being written concurrently may be incomplete
            continue
    return out


OPENMP_TASKS = _loadable("openmp")
MPI_TASKS = _loadable("mpi")


def state_for(task: Task, parent: Candidate | None = None, history: tuple[Candidate, ...] = (),
              cores: int = 2) -> SearchState:
    """The search state the brief describes; history entries carry no result (the tuner reads only the
    parent's, for its roofline: test_roofline_reorders_compute_moves)."""
    baseline = Candidate(files={task.kernel: task.baseline_source()}, author="baseline")
    return SearchState(task=task, baseline=baseline, parent=parent or baseline,
                       history=[(c, None) for c in history], cores=cores)  # type: ignore[misc]


def kernel(task: Task, c: Candidate) -> str:
    return c.files[task.kernel]


def fake_task(root: Path, target: str, source: str, **extra: str) -> Task:
    root.mkdir(parents=True, exist_ok=True)
    (root / "kernel.c").write_text(source)
    (root / "harness.c").write_text("/* not used here */\n")
    sections = "".join(f"\n{v}\n" for v in extra.values())
    (root / "task.toml").write_text(f'''name = "{root.name}"
target = "{target}"
description = "test task"
kernel = "kernel.c"
functions = ["k"]
signature = "void k(long n, double *x, double *y)"
[sizes]
check = [1, 5]
random = [2, 9]
timing = 100
race = 8
{sections}''')
    return load_task(root)


@pytest.fixture
def gemm() -> Task:
    return load_task(ROOT / "tasks/openmp/gemm")


def compile_error(task: Task, source: str, tmp_path: Path, cc: str = "gcc") -> str:
    src = tmp_path / task.kernel
    src.write_text(source)
    r = subprocess.run([cc, "-fopenmp", "-Wall", "-c", "-I", str(HEADERS), "-I", str(task.root), str(src),
                        "-o", str(tmp_path / "k.o")], capture_output=True, text=True)
    return "" if r.returncode == 0 else r.stderr or "failed"


def test_gemm_first_proposals_interchange_then_parallelize_outer_loop(gemm: Task) -> None:
    props = TunerPolicy().propose(state_for(gemm), 4)
    assert len(props) == 4
    assert props[0].idea.startswith("interchange the j and k loops")  # the stride-1 nest: worth more than threads
    assert "#pragma omp parallel for\n    for (long i = 0" in kernel(gemm, props[1])
    assert all(c.author == "tuner" and c.parent == state_for(gemm).baseline.id and c.idea for c in props)
    assert any("collapse(2)" in kernel(gemm, c) for c in props)


@needs_gcc
@pytest.mark.parametrize("task_dir", OPENMP_TASKS, ids=[d.name for d in OPENMP_TASKS])
def test_every_proposal_compiles(task_dir: Path, tmp_path: Path) -> None:
    task = load_task(task_dir)
    st = state_for(task, cores=4)
    props = TunerPolicy().propose(st, 500)
    # one refinement step too (gauss_seidel and prefix_sum have no parallel-for move: every loop carries a dependence)
    parent = next((c for c in props if "parallel for" in kernel(task, c)), props[0])
    props += TunerPolicy().propose(state_for(task, parent=parent, cores=4), 500)
    for c in {kernel(task, c): c for c in props}.values():
        assert compile_error(task, kernel(task, c), tmp_path) == "", c.idea


def test_distinct_and_unseen(gemm: Task) -> None:
    first = TunerPolicy().propose(state_for(gemm), 6)
    assert len({c.id for c in first}) == len(first) == 6
    st = state_for(gemm, history=tuple(first[:3]))
    second = TunerPolicy().propose(st, 50)
    ids = [c.id for c in second]
    assert len(set(ids)) == len(ids) and not set(ids) & st.seen and st.parent.id not in ids
    assert first[3].id in ids


def test_deterministic(gemm: Task) -> None:
    a = TunerPolicy().propose(state_for(gemm, cores=8), 30)
    b = TunerPolicy().propose(state_for(gemm, cores=8), 30)
    assert [(c.id, c.idea) for c in a] == [(c.id, c.idea) for c in b]


def test_refining_a_parallel_parent_stacks_moves(gemm: Task) -> None:
    parent = next(c for c in TunerPolicy().propose(state_for(gemm), 4) if "omp parallel for" in kernel(gemm, c))
    props = TunerPolicy().propose(state_for(gemm, parent=parent, cores=8), 100)
    assert props and all(c.parent == parent.id for c in props)
    assert all(kernel(gemm, c).count("omp parallel") == 1 for c in props)  # never re-added or nested
    ideas = " | ".join(c.idea for c in props)
    assert "simd" in ideas and "schedule(" in ideas and "collapse(2)" in ideas
    assert any(c.threads == 8 for c in props) and any(c.bind in ("close", "spread") for c in props)
    assert all(c.threads is None or 1 <= c.threads <= 8 for c in props)
    simd = next(c for c in props if "omp simd" in kernel(gemm, c))
    assert "#pragma omp simd reduction(+:s)" in kernel(gemm, simd)
    flagged = next(c for c in props if c.cflags == ["-march=native"])
    again = TunerPolicy().propose(state_for(gemm, parent=flagged, cores=8), 100)
    assert not any(c.cflags.count("-march=native") > 1 for c in again)
    assert all(kernel(gemm, c).count("omp parallel") == 1 for c in again)


def test_no_threads_or_bind_without_openmp_in_source(gemm: Task) -> None:
    props = TunerPolicy().propose(state_for(gemm, cores=8), 500)
    assert all(c.threads is None and c.bind is None for c in props)


def test_fast_math_only_when_allowed(gemm: Task) -> None:
    assert not any("-ffast-math" in c.cflags for c in TunerPolicy().propose(state_for(gemm), 500))
    allowed = gemm.model_copy(update={"verify": gemm.verify.model_copy(update={"allow_fast_math": True})})
    assert any(c.cflags == ["-ffast-math"] for c in TunerPolicy().propose(state_for(allowed), 500))
    flags = [f for c in TunerPolicy().propose(state_for(gemm), 500) for f in c.cflags]
    assert {"-march=native", "-funroll-loops", "-O2"} <= set(flags)


def test_tunables_become_defines(gemm: Task) -> None:
    task = gemm.model_copy(update={"tunables": [Tunable(name="BS", values=[16, 32]), Tunable(name="U", values=["a"])]})
    props = TunerPolicy().propose(state_for(task), 500)
    defines = [c.defines for c in props if c.defines]
    assert defines == [{"BS": "16"}, {"BS": "32"}, {"U": "a"}]
    parent = next(c for c in props if c.defines == {"BS": "16"})
    again = TunerPolicy().propose(state_for(task, parent=parent), 500)
    assert all(c.defines.get("BS") in ("16", "32") for c in again) and "set BS=16" not in [c.idea for c in again]
    assert {"BS": "32"} in [c.defines for c in again] and {"BS": "16", "U": "a"} in [c.defines for c in again]


MPI_KERNEL = """#include <mpi.h>
void k(long n, double *x, double *y) {
    double s = 0.0;
    for (long i = 0; i < n; i++) s += x[i] * y[i];
    MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    y[0] = s;
}
"""


def test_mpi_task_gets_ranks_bind_flags_no_pragmas(tmp_path: Path) -> None:
    task = fake_task(tmp_path / "mdot", "mpi", MPI_KERNEL, timing="[timing]\nranks = 2")
    props = TunerPolicy().propose(state_for(task, cores=8), 500)
    assert all(kernel(task, c) == MPI_KERNEL for c in props)  # no omp pragmas for pure MPI
    assert {c.ranks for c in props} >= {8, 4, 1} and all(c.ranks is None or 1 <= c.ranks <= 8 for c in props)
    assert {c.bind for c in props} == {None, "core", "none"}
    assert any(c.cflags == ["-march=native"] for c in props)
    assert all(c.threads is None for c in props)
    assert props[0].ranks == 8  # more ranks first
    parent = next(c for c in props if c.ranks == 4)
    again = TunerPolicy().propose(state_for(task, parent=parent, cores=8), 500)
    assert any(c.ranks is None and "task default" in c.idea for c in again)


@pytest.mark.parametrize("task_dir", MPI_TASKS, ids=[d.name for d in MPI_TASKS])
def test_repo_mpi_tasks(task_dir: Path) -> None:
    task = load_task(task_dir)
    props = TunerPolicy().propose(state_for(task, cores=4), 500)
    assert props and any(c.ranks == 4 for c in props) and any(c.bind == "core" for c in props)
    if not task.uses_openmp:
        assert all(kernel(task, c) == task.baseline_source() for c in props)


HYBRID_KERNEL = """#include <mpi.h>
void k(long n, double *x, double *y) {
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int r = 1; r < size; r++) MPI_Send(x, (int)n, MPI_DOUBLE, r, 0, MPI_COMM_WORLD);
    for (long i = 0; i < n; i++) y[i] = 2.0 * x[i];
}
"""


@needs_gcc
def test_hybrid_task_gets_both(tmp_path: Path) -> None:
    task = fake_task(tmp_path / "hyb", "mpi+openmp", HYBRID_KERNEL)
    props = TunerPolicy().propose(state_for(task, cores=4), 500)
    pragmas = [c for c in props if "#pragma omp" in kernel(task, c)]
    assert "for (long i" in kernel(task, pragmas[0]).split("#pragma omp parallel for", 1)[1].split("\n")[1]
    assert any(c.ranks == 4 for c in props) and any(c.bind == "core" for c in props)
    if shutil.which("mpicc"):
        for c in pragmas:
            assert compile_error(task, kernel(task, c), tmp_path, "mpicc") == "", c.idea


RECURRENCE = """void k(long n, double *x, double *y) {
    for (long i = 1; i < n; i++) x[i] = x[i - 1] + y[i];
    for (long i = 0; i < n; i++) y[i] = 2.0 * x[i];
}
"""
TRIANGULAR = """void k(long n, double *x, double *y) {
    for (long i = 0; i < n; i++)
        for (long j = 0; j <= i; j++)
            y[i * n + j] = x[i] * x[j];
}
"""


def test_recurrence_not_parallelized(tmp_path: Path) -> None:
    task = fake_task(tmp_path / "rec", "openmp", RECURRENCE)
    props = [c for c in TunerPolicy().propose(state_for(task), 500) if "parallel for" in kernel(task, c)]
    assert "#pragma omp parallel for\n    for (long i = 0" in kernel(task, props[0])
    # x[i] = x[i - 1] + ...: the analysis proves the loop carries a flow dependence (it was proposed, ranked lower,
    # before issue 17's pruning; the verifier then refused it)
    assert not any("#pragma omp parallel for\n    for (long i = 1" in kernel(task, c) for c in props)


def test_triangular_prefers_dynamic_and_never_collapses(tmp_path: Path) -> None:
    task = fake_task(tmp_path / "tri", "openmp", TRIANGULAR)
    props = TunerPolicy().propose(state_for(task), 500)
    assert "schedule(dynamic, 16)" in kernel(task, props[0])
    assert not any("collapse" in kernel(task, c) for c in props)


def test_serial_target_gets_only_flags_and_defines(tmp_path: Path) -> None:
    task = fake_task(tmp_path / "ser", "c", TRIANGULAR)
    props = TunerPolicy().propose(state_for(task, cores=8), 500)
    assert props and all(kernel(task, c) == TRIANGULAR and c.threads is None and c.ranks is None for c in props)
    assert TunerPolicy().name == "tuner"


def test_a_tunable_value_the_kernel_already_has_is_not_proposed(gemm: Task) -> None:
    source = "#ifndef BS\n#define BS 32\n#endif\n" + gemm.baseline_source()
    task = gemm.model_copy(update={"tunables": [Tunable(name="BS", values=[16, 32, 64])]})
    base = Candidate(files={task.kernel: source}, author="baseline")
    props = TunerPolicy().propose(state_for(task, parent=base), 500)
    assert sorted(c.defines["BS"] for c in props if c.defines) == ["16", "64"]  # BS=32 would rebuild the same program


@needs_gcc
@pytest.mark.skipif(shutil.which("clang") is None, reason="needs clang for the race check")
def test_histogram_gets_an_array_section_reduction_that_verifies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The histogram's scatter loop (hist[bin]++) is proposed early with reduction(+:hist[:extent]), and
    that candidate passes the evaluator: verified at every thread count, race check clean (untimed)."""
    task = load_task(ROOT / "tasks/openmp/histogram")
    props = TunerPolicy().propose(state_for(task), 3)
    pragma = "#pragma omp parallel for reduction(+:hist[:NRING * NSECT])\n    for (long i = 0"
    cand = next(c for c in props if pragma in kernel(task, c))
    result = untimed(task, cand, monkeypatch, tmp_path)
    assert result.status == "ok", f"{result.status}: {result.reason}\n{result.log[-1500:]}"
    assert result.verification.race_check == "clean", result.verification.race_detail
    assert max(result.verification.threads) > 1


def untimed(task: Task, cand: Candidate, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> EvalResult:
    """The evaluator's untimed check of `cand` (builds, verification at every thread count, race check), under a
    host lock of the test's own: it checks results, not timings, and must not queue behind other timing work."""
    monkeypatch.setenv("KERNOPT_HOST_LOCK", str(tmp_path / "host.lock"))
    with enterable_tmpdir("kernopt-tuner-test-") as d:
        ev = CFamilyEvaluator(task, get_sandbox("local"), EvalConfig(), d / "ev")
        try:
            return ev.check_untimed(cand)[0]
        finally:
            ev.close()


def _roofline(bound: str, fraction: float) -> Roofline:
    return Roofline(flops=1e9, bytes=1e9, seconds=0.1, gflops=10.0, gbps=10.0, threads=2, peak_gflops=100.0,
                    bandwidth_gbps=40.0, bound=bound, bound_s=0.1 * fraction, fraction=fraction)  # type: ignore[arg-type]


def test_roofline_reorders_compute_moves(gemm: Task) -> None:
    """Near the bandwidth roof, compute moves (flags, simd) go behind everything else; compute-bound and far
    from the peak, they and locality moves come forward; without a timed parent, the fixed prior."""
    parent = next(c for c in TunerPolicy().propose(state_for(gemm), 4) if "omp parallel for" in kernel(gemm, c))

    def order(roof: Roofline | None) -> list[str]:
        st = state_for(gemm, parent=parent, cores=8)
        if roof is not None:
            st.history.append((parent, EvalResult(candidate_id=parent.id, status="ok", roofline=roof)))
        return [c.idea for c in TunerPolicy().propose(st, 500)]

    def rank(ideas: list[str], needle: str) -> int:
        return next(i for i, idea in enumerate(ideas) if needle in idea)

    plain, memory, compute = order(None), order(_roofline("memory", 0.8)), order(_roofline("compute", 0.1))
    assert set(plain) == set(memory) == set(compute)  # the same moves, reordered
    assert rank(plain, "-march=native") < rank(plain, "bind close")
    assert rank(memory, "-march=native") > rank(memory, "bind close") and rank(memory, "simd") > rank(memory, "schedule(")
    assert rank(compute, "-march=native") < rank(plain, "-march=native")
    assert order(_roofline("memory", 0.3)) == plain  # far from the bandwidth roof: no reason to reorder


def test_gccs_own_loop_optimizers_are_moves(gemm: Task) -> None:
    """Issue 17, item 3: graphite's loop-nest optimizer always, and gcc's auto-parallelizer (bench/peers.py's
    "gcc autopar" peer) on a kernel without OpenMP of its own; the static gate accepts both flag sets."""
    from kernopt.evaluators.c_family.static_gate import check_source

    props = TunerPolicy().propose(state_for(gemm, cores=2), 500)
    graphite = next(c for c in props if "-floop-nest-optimize" in c.cflags)
    autopar = next(c for c in props if "-ftree-parallelize-loops=2" in c.cflags)
    assert autopar.cflags == ["-ftree-parallelize-loops=2", "-floop-parallelize-all"] and graphite.cflags == ["-floop-nest-optimize"]
    assert check_source(gemm, graphite) is None and check_source(gemm, autopar) is None
    parallel = next(c for c in props if "omp parallel for" in kernel(gemm, c))
    again = TunerPolicy().propose(state_for(gemm, parent=parallel, cores=2), 500)
    assert not [c for c in again if any(f.startswith("-ftree-parallelize-loops") for f in c.cflags)]  # OpenMP already


@pytest.mark.parametrize("name, kept, dropped", [
    ("openmp/gauss_seidel", [], ["t", "i", "j"]),  # in-place sweeps: every loop carries a dependence
    ("openmp/prefix_sum", [], ["i", "p"]),  # s is read after it is updated: a scan, not a reduction
    ("openmp/reduction", ["i"], []),  # s only accumulates: reduction(+:s) takes care of it
    ("openmp/histogram", ["b", "i"], []),  # an array reduction over the bins
    ("loops/gemm_ab", ["i", "j"], ["k"]),  # C[i][j] += ... carries over k
    ("loops/sor_f32", [], ["it", "i", "j"]),
])
def test_no_parallel_for_on_a_loop_that_carries_a_dependence(name: str, kept: list[str], dropped: list[str]) -> None:
    """The dependence analysis prunes parallel-for moves the pattern matcher would offer (issue 17): a loop that
    carries a dependence through anything but its reduction and private variables gets none."""
    task = load_task(ROOT / "tasks" / name)
    ideas = [c.idea for c in TunerPolicy().propose(state_for(task, cores=2), 500)]
    on = {m.group(1) for i in ideas if (m := re.search(r"add `#pragma omp parallel for[^`]*` on the (\w+) loop", i))}
    assert set(kept) <= on and not set(dropped) & on, (on, ideas)


def _timed(c: Candidate, speedup: float, status: str = "ok") -> tuple[Candidate, EvalResult]:
    timing = TimingStats(baseline_s=[1.0], candidate_s=[1.0 / speedup], baseline_median_s=1.0, candidate_median_s=1.0 / speedup,
                         speedup=speedup, ci_low=speedup, ci_high=speedup, p_value=0.001)
    return c, EvalResult(candidate_id=c.id, status=status, timing=timing if status == "ok" else None)  # type: ignore[arg-type]


def test_a_move_that_measured_slower_or_failed_is_not_proposed_again(gemm: Task) -> None:
    """Issue 17 item 5: the same change (same idea, same loop) on a later best is skipped once it measured
    slower than the candidate it changed, or failed verification; a timeout may pass another time."""
    st = state_for(gemm)
    first = {c.idea.split(" (")[0]: c for c in TunerPolicy().propose(st, 8)}
    best = first["interchange the j and k loops"]
    slower, wrong = first["add `#pragma omp parallel for` on the i loop"], first["compile for the host CPU"]
    timeout = first["gcc auto-parallelization over 2 threads with graphite"]
    st.history = [_timed(best, 5.0)]
    st.parent = best
    again = [c.idea for c in TunerPolicy().propose(st, 500)]
    assert {slower.idea, wrong.idea, timeout.idea} <= set(again)  # each is a move on the new best too
    st.history += [_timed(slower, 0.8), _timed(wrong, 1.0, "wrong_answer"), _timed(timeout, 1.0, "timeout")]
    ideas = [c.idea for c in TunerPolicy().propose(st, 500)]
    assert slower.idea not in ideas and wrong.idea not in ideas and timeout.idea in ideas


def _top_moves(task_dir: str, source: str | None = None, k: int = 3) -> list[str]:
    from kernopt.tuner.policy import all_moves
    task = load_task(Path(task_dir))
    assert isinstance(task, Task)
    src = source if source is not None else task.baseline_source()
    moves = sorted(all_moves(task, Candidate(files={task.kernel: src}), 2), key=lambda m: -m.score)
    return [m.idea for m in moves[:k]]


def test_the_loop_inside_a_serial_loop_is_proposed_first() -> None:
    """No fork/join charge for an enclosing loop that runs serially anyway: a factorization's step the dependence
    analysis proves carrying (cholesky_right, after the triangular interchange): the loop inside is the first move,
    ahead of the compiler flags. A time loop that rotates buffers through an array of pointers (wave2d_f32) is
    outside the model: no parallel move on any of its loops (issue 27, item 6: "don't know" means no move)."""
    from kernopt.tuner.permute import permutations
    assert not any("omp parallel for" in idea for idea in _top_moves("tasks/loops/wave2d_f32", k=100))
    chol = load_task(Path("tasks/loops/cholesky_right"))
    [p] = permutations(chol.baseline_source())
    first, second = _top_moves("tasks/loops/cholesky_right", p.source, 2)
    assert "`#pragma omp parallel for schedule(dynamic, 16)` on the i loop (line 14)" in first  # with the other nest's
    assert second == "add `#pragma omp parallel for schedule(dynamic, 16)` on the i loop (line 14)"
    # lu_rowwise indexes through its IDX(i, j) macro: expanded, the nest is in the model, the i loop (line 11) proven
    # carrying is never proposed, the U part's j loop (line 17) is
    moves = _top_moves("tasks/loops/lu_rowwise", k=20)
    assert not any("parallel for" in idea and "line 11)" in idea for idea in moves)
    assert "add `#pragma omp parallel for` on the j loop (line 17)" in moves
    # collapse(2) would run the k loop inside in parallel too, and that one carries the sum (a wrong answer, seen)
    assert not any("collapse" in idea for idea in moves)


def test_every_nest_parallelized_at_once_and_it_verifies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel of several nests (tridiag_soa: a copy, then per time step an init loop, a forward and a backward
    sweep over the struct's member arrays, each parallel only along the rods) gets one move that parallelizes
    every nest's proven loop at once, second to the tiled isl schedule with the rod loop of each tile sunk below the
    sweeps; never the sweeps' i loops, which carry the recurrence. Both candidates pass the evaluator (verified at
    every thread count, race check clean; untimed)."""
    task = load_task(ROOT / "tasks/loops/tridiag_soa")
    tiled, every = TunerPolicy().propose(state_for(task), 4)[:2]
    assert tiled.idea.startswith("isl schedule: reschedule the nest at line 22 of tridiag_soa; tile 64x64 over s, t; "
                                 "the s loop of each tile innermost, below the loops inside; parallel for"), tiled.idea
    assert every.idea.startswith("parallelize every nest at once:")
    for line in (20, 23, 28, 35):
        assert f"loop (line {line})" in every.idea
    ideas = [c.idea for c in TunerPolicy().propose(state_for(task), 500)]
    assert not any("parallel for" in i and ("line 27)" in i or "line 34)" in i) for i in ideas)
    for k, cand in enumerate((every, tiled)):
        (tmp_path / str(k)).mkdir()
        result = untimed(task, cand, monkeypatch, tmp_path / str(k))
        assert result.status == "ok", f"{result.status}: {result.reason}\n{result.log[-1500:]}"
        assert result.verification.race_check == "clean", result.verification.race_detail


def test_a_ping_pong_time_loop_gets_its_sweep_parallelized_and_it_verifies(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """diffuse3d swaps `src` and `dst` after each time step: the time loop is outside the model, so its sweep is
    analysed alone (the two pointers take turns holding u and tmp, never the same one). The first batch
    parallelizes the sweep inside the time loop, never the time loop itself, and the candidate passes the evaluator
    (verified at every thread count, race check clean; untimed)."""
    task = load_task(ROOT / "tasks/loops/diffuse3d")
    first = TunerPolicy().propose(state_for(task), 4)
    assert first[0].idea.startswith("parallelize every nest at once:") and "i loop (line 17)" in first[0].idea
    assert any(c.idea == "add `#pragma omp parallel for` on the i loop (line 17)" for c in first)
    ideas = [c.idea for c in TunerPolicy().propose(state_for(task), 500)]
    assert not any("parallel for" in i and "the t loop" in i for i in ideas)
    result = untimed(task, first[0], monkeypatch, tmp_path)
    assert result.status == "ok", f"{result.status}: {result.reason}\n{result.log[-1500:]}"
    assert result.verification.race_check == "clean", result.verification.race_detail


def test_a_packed_triangle_gets_its_row_loop_parallelized_and_it_verifies(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """rbf_gram_soa writes row i of a packed triangle through `double *row = g + i * (i - 1) / 2`: the rows are
    proven disjoint, so the i loop's `parallel for` (dynamic: the rows grow) comes first, and it verifies."""
    task = load_task(ROOT / "tasks/loops/rbf_gram_soa")
    first = TunerPolicy().propose(state_for(task), 4)
    assert first[0].idea == "add `#pragma omp parallel for schedule(dynamic, 16)` on the i loop (line 14)", first[0].idea
    result = untimed(task, first[0], monkeypatch, tmp_path)
    assert result.status == "ok", f"{result.status}: {result.reason}\n{result.log[-1500:]}"
    assert result.verification.race_check == "clean", result.verification.race_detail


def test_the_polly_build_is_tried_in_the_first_batch_and_a_polly_parent_does_not_end_the_search(gemm: Task) -> None:
    """Issue 17, item 3: on the baseline the Polly build takes the first batch's last place whatever its score; a
    Polly build as the parent takes flags only, so the proposals also go on from the best gcc build."""
    first = TunerPolicy().propose(state_for(gemm), 4)
    assert first[-1].toolchain == "polly" and all(c.toolchain is None for c in first[:-1])
    polly, gcc_best = first[-1], first[0]
    st = state_for(gemm, parent=polly)
    st.history = [_timed(gcc_best, 3.0), _timed(polly, 4.0)]
    props = TunerPolicy().propose(st, 500)
    assert {c.parent for c in props} == {polly.id, gcc_best.id}
    assert all(c.toolchain == "polly" for c in props if c.parent == polly.id)
    assert any("omp" in kernel(gemm, c) and c.parent == gcc_best.id for c in props)


HOSTILE = ROOT / "tests/data/deps_hostile"


def _edits(name: str) -> list[str]:
    from kernopt.tuner.cmacros import expand
    from kernopt.tuner.pragmas import pragma_edits
    source = (HOSTILE / name).read_text()
    return [idea for _, _, idea, _ in pragma_edits(expand(source))]


def test_pragma_moves_on_shapes_a_red_team_found() -> None:
    # two loops on one line: the outer i loop carries (it must not get the inner j loop's verdict)
    assert not any("on the i loop (line 2)" in idea for idea in _edits("r2_f1_oneline.c"))
    # the inner loop's array reduction is not the outer loop's: collapse(2) there would race
    assert not any("collapse" in idea for idea in _edits("r2_f2_collapse.c"))
    # a private variable read after the loop leaves it holding the last iteration's value
    ideas = _edits("r2_f3_private_liveout.c")
    assert "add `#pragma omp parallel for lastprivate(t)` on the i loop (line 3)" in ideas
    assert not any("private(t)" in idea and "lastprivate" not in idea for idea in ideas)


@pytest.mark.parametrize("name", ["r2_o15_long_expr.c", "r2_o16_deep_macro_400.c"])
def test_code_nested_too_deep_does_not_crash_the_tuner(name: str, tmp_path: Path) -> None:
    from kernopt.tuner.policy import all_moves
    task_dir = tmp_path / "task"
    shutil.copytree(ROOT / "tests/data/small_gemm", task_dir)
    task = load_task(task_dir)
    assert isinstance(task, Task)
    moves = all_moves(task, Candidate(files={task.kernel: (HOSTILE / name).read_text()}, author="baseline"), 2)
    assert any(m.idea.startswith("compile for the host CPU") for m in moves)  # the flags are still there



def test_clauses_on_shapes_a_third_red_team_found() -> None:
    # a macro hid a read (`last`) or a write (`s = 0.0`) from the clauses: the moves read the expanded text now
    assert not any("private(last)" in idea and "lastprivate" not in idea for idea in _edits("r3_f1_macro_hidden_read.c"))
    assert not any("reduction(+:s)" in idea for idea in _edits("r3_f1b_macro_hidden_write.c"))
    assert "add `#pragma omp parallel for lastprivate(t)` on the i loop (line 6)" in _edits("r3_f1c_macro_hidden_liveout.c")
    # t set only where in[i] > 0 and read after the loop: no clause makes a parallel loop right, so no move
    assert not any("on the i loop" in idea for idea in _edits("r3_f2_lastprivate_conditional.c"))
    # read again by the loop around it (next sweep), or a global: lastprivate
    assert "add `#pragma omp parallel for lastprivate(t)` on the i loop (line 7)" in _edits("r3_f3_private_read_before_in_outer.c")
    assert "add `#pragma omp parallel for lastprivate(g_last)` on the i loop (line 6)" in _edits("r3_f3b_private_global.c")
    # loop variables declared outside and read after the loop
    assert "add `#pragma omp parallel for lastprivate(i)` on the i loop (line 5)" in _edits("r3_f8_loopvar_after.c")
    collapse = _edits("r3_f8b_collapse_inner_var_after.c")
    assert "add `#pragma omp parallel for collapse(2) lastprivate(i, j)` on the i loop (line 4)" in collapse
    assert "add `#pragma omp parallel for lastprivate(j, i)` on the i loop (line 4)" in collapse


def test_two_loops_one_line_from_a_macro_get_no_verdict_from_each_other() -> None:
    from kernopt.tuner.cmacros import expand
    from kernopt.tuner.pragmas import pragma_edits
    source = expand((HOSTILE / "r3_f9_macro_loop_same_line.c").read_text())
    [best] = [new for new, score, idea, _ in pragma_edits(source) if score >= 100]
    assert "#pragma omp parallel for\n    for (int i = 0; i < (n); i++) b[i] = 0.0;" in best  # the CLEAR loop, not the recurrence


def test_a_product_chain_is_permuted_and_parallel_in_one_move_then_a_batch_spreads_over_move_families() -> None:
    """tasks/derived/chain2_ab: the isl schedule that makes both products stride-1 and parallel is the first proposal
    (the permutation and the parallel for in one move: 8.6x in one run, where the two-step path had 4.1x after 5
    candidates). From it, four unroll-and-jam variants (k by 2 and 4 in each product: the k == 0 iteration is a loop
    of its own, so k's loop nest is perfect) rank above -march=native; a batch takes two of one family and then the
    best of the others, so -march=native is in the next batch of 4."""
    task = load_task(ROOT / "tasks/derived/chain2_ab")
    first = TunerPolicy().propose(state_for(task), 4)
    assert first[0].idea.startswith("isl schedule: keep apart the 2 nests of chain2_ab; l innermost for stride-1 "
                                    "accesses; j innermost for stride-1 accesses; parallel for on i")
    second = TunerPolicy().propose(state_for(task, parent=first[0]), 4)
    ideas = [c.idea for c in second]
    assert sum(i.startswith("unroll-and-jam") for i in ideas) == 2, ideas
    assert any(c.cflags == ["-march=native"] for c in second), ideas
    every = TunerPolicy().propose(state_for(task, parent=first[0]), 500)
    assert sum(c.idea.startswith("unroll-and-jam") for c in every) == 4  # deferred, not dropped


def test_a_schedule_of_the_deeper_nest_ranks_first_and_a_same_worded_one_not_beside_it() -> None:
    """tasks/derived/corr_derived: four nests, none of them permuted and parallel by one schedule of the whole function.
    The product's 3-deep nest (line 33) gets its schedule before the means' 2-deep ones (1.87x -> 5.08x at budget 8
    measured); two schedules of one nest that read the same are not both in one batch."""
    from kernopt.tuner.policy import schedule_moves
    task = load_task(ROOT / "tasks/derived/corr_derived")
    source = task.baseline_source()
    moves = sorted(schedule_moves("kernel.c", source, {"kernel.c": source}, True), key=lambda m: -m.score)
    assert "the nest at line 33 of corr_derived" in moves[0].idea and moves[0].score == 143.0
    assert "parallel for on i" in moves[0].idea and "tile" not in moves[0].idea
    ideas = [m.idea for m in moves]
    twice = {i for i in ideas if ideas.count(i) > 1}
    assert twice  # the means' nest at line 17: fusion max and min give different code, the same words
    for idea in twice:
        same = [m.score for m in moves if m.idea == idea]
        assert max(same) - min(same) >= 10.0, (idea, same)
