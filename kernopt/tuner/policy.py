"""The offline tuner: single, prior-ranked moves on the parent candidate. The verifier decides.

Each move changes one thing (a pragma, a loop interchange, a flag, a thread/rank count, a binding, a
tunable define). Greedy refinement stacks them because the search hands back the best candidate as
the next parent. The tuner may propose racy pragmas (verification rejects them); it only ever emits
valid C. The fixed prior is adjusted by what bounds the parent (its roofline, `roofline_adjust`).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kernopt.agent.base import SearchState
from kernopt.candidate import Candidate
from kernopt.evaluators.knobs import declared_knobs, knob_values
from kernopt.evaluators.result import Roofline
from kernopt.task import AnyTask, Task
from kernopt.tuner.cmacros import expand
from kernopt.tuner.interchange import interchanges
from kernopt.tuner.permute import permutations
from kernopt.tuner.pragmas import pragma_edits
from kernopt.tuner.scalarize import scalarizations
from kernopt.tuner.tile import tilings
from kernopt.tuner.unroll import unroll_jams
from kernopt.tuner.wavefront import wavefronts

if TYPE_CHECKING:
    from kernopt.tuner.schedule import Scheduled

_FLAGS = (("-march=native", 72.0, "compile for the host CPU (-march=native)"),
          ("-funroll-loops", 50.0, "unroll loops (-funroll-loops)"),
          ("-O2", 36.0, "optimize at -O2 instead of the default level"))
_FAST_MATH = ("-ffast-math", 68.0, "allow reassociation and vectorized FP reductions (-ffast-math)")
_OMP_BIND = (("close", 42.0), ("spread", 38.0))
_MPI_BIND = (("core", 42.0), ("none", 36.0))
# The moves' flags clang also takes (a Polly build keeps these of its parent's and is offered only these).
CLANG_FLAGS = frozenset({"-march=native", "-funroll-loops", "-O2", "-ffast-math", "-fopenmp-simd"})
_USES_OMP = re.compile(r"#\s*pragma\s+omp\b|\bomp_\w+\s*\(")


@dataclass(frozen=True)
class Move:
    """One proposed change: `changes` are Candidate fields to replace; higher `score` is tried first.
    `kind` says what the move buys: "compute" (vector code, instruction selection), "locality" (memory
    access order), or "other" (parallelism, configuration)."""

    score: float
    idea: str
    changes: dict[str, object] = field(default_factory=dict)
    kind: str = "other"


class TunerPolicy:
    """Offline tuner policy: OpenMP pragmas, compiler flags, threads/ranks/binding and tunables.

    Proposals are derived from `state.parent`, exclude ids already seen, and are ordered by a fixed
    prior; the same state always yields the same list.
    """

    name = "tuner"

    def propose(self, state: SearchState, n: int) -> list[Candidate]:
        parents = [state.parent]
        if state.parent.toolchain is not None:  # a compiler's own build takes flags only: go on from the best gcc build too
            parents.append(_best_own_build(state))
        ranked: list[tuple[float, int, Candidate, Move]] = []
        for parent in parents:
            result = state.result_of(parent.id)
            roof = result.roofline if result is not None else None
            for move in all_moves(state.task, parent, max(1, state.cores)):
                ranked.append((move.score + roofline_adjust(move, roof), len(ranked), parent, move))
        ranked.sort(key=lambda r: (-r[0], r[1]))  # ties keep generation order
        if state.parent.id == state.baseline.id:
            ranked = _compiler_build_first(ranked, n)
        seen = state.seen | {p.id for p in parents}
        spent = spent_ideas(state)
        out: list[Candidate] = []
        deferred: list[Candidate] = []
        families: dict[str, int] = {}
        for _, _, parent, move in ranked:
            if len(out) >= n:
                break
            if move.idea in spent:
                continue
            cand = parent.model_copy(update={**move.changes, "parent": parent.id, "idea": move.idea,
                                             "author": "tuner"}, deep=True)
            if cand.id in seen:
                continue
            seen.add(cand.id)
            family = _family(move)
            families[family] = families.get(family, 0) + 1
            (out if families[family] <= PER_FAMILY else deferred).append(cand)
        return (out + deferred)[:n]


PER_FAMILY = 2  # moves of one family in a batch before the next family's best gets its turn


def _family(move: Move) -> str:
    """What kind of change a move makes, by its idea's first word ("unroll-and-jam", "isl", "tile", "compile"...; the
    pragma edits, "add ..." and "use ...", are one family). A batch takes at most PER_FAMILY of one family before the
    best of the others (issue 27: eight unroll-and-jam variants of a product chain's two nests filled two batches
    and -march=native, worth 1.5x there, was never tried at budget 12); the rest follow if the batch has room."""
    word = move.idea.split(" ", 1)[0]
    return "pragma" if word in ("add", "use") else word


def _best_own_build(state: SearchState) -> Candidate:
    """The fastest verified candidate built by the task's own compiler (the baseline if none is faster)."""
    best, speedup = state.baseline, 1.0
    for cand, result in state.history:
        if cand.toolchain is None and result is not None and result.speedup is not None and result.speedup > speedup:
            best, speedup = cand, result.speedup
    return best


def _compiler_build_first(ranked: list[tuple[float, int, Candidate, Move]], n: int) -> list[tuple[float, int, Candidate, Move]]:
    """On the baseline, the build with clang's Polly takes the last place of the first batch whatever its score (issue
    17, item 3): a compiler's own optimizer sometimes wins big where the tuner's moves do not (a 4.5x covariance), and a
    tuner that tries it once is never behind it."""
    polly = next((r for r in ranked if r[3].changes.get("toolchain") == "polly"), None)
    if polly is None or n < 2 or ranked.index(polly) < n:
        return ranked
    rest = [r for r in ranked if r is not polly]
    return rest[:n - 1] + [polly] + rest[n - 1:]


SLOWER = 0.95  # a child at less than this fraction of its parent's speedup measured slower


def spent_ideas(state: SearchState) -> set[str]:
    """Ideas the tuner already tried in this run that failed or measured slower than the candidate they
    changed (issue 17, item 5): the same change on a later best is not proposed again. A move's idea names
    the loop (and its line), so this is per nest, not per kind of move."""
    out = set()
    for cand, result in state.history:
        if cand.author != "tuner" or cand.parent is None or result is None:
            continue
        if result.status in ("compile_error", "runtime_error", "wrong_answer", "rejected"):  # not timeout/infra: may pass
            out.add(cand.idea)
        elif result.status == "ok" and result.timing is not None:
            before = state.result_of(cand.parent)
            parent = 1.0 if cand.parent == state.baseline.id else \
                before.timing.speedup if before is not None and before.timing is not None else None
            if parent is not None and result.timing.speedup < SLOWER * parent:
                out.add(cand.idea)
    return out


def _flags_of(move: Move) -> list[str]:
    flags = move.changes.get("cflags")
    return [str(f) for f in flags] if isinstance(flags, list) else []


def all_moves(task: AnyTask, parent: Candidate, cores: int) -> list[Move]:
    """Every single-step move applicable to the parent, unsorted. GPU targets (Triton, CUDA) get their
    declared tunables only: block sizes, num_warps, num_stages, launch-configuration macros."""
    source = parent.files.get(task.kernel, "")
    if task.uses_gpu:
        return tunable_moves(task, parent)
    assert isinstance(task, Task)
    moves: list[Move] = []
    # The moves read (and rewrite) the kernel with the file's own macros expanded: a nest indexed through
    # `IDX(i, j)` is then inside the dependence model, and a macro cannot hide a read from a clause.
    expanded = expand(source)
    if task.language == "c" and source:
        moves += interchange_moves(task.kernel, expanded, parent.files)
        moves += permutation_moves(task.kernel, expanded, parent.files, task.uses_openmp)
        moves += unroll_moves(task.kernel, expanded, parent.files)
        moves += tiling_moves(task.kernel, expanded, parent.files, task.uses_openmp)
        moves += schedule_moves(task.kernel, expanded, parent.files, task.uses_openmp and parent.toolchain is None) \
            if not task.uses_mpi else []  # a Polly build's parallel loops are its own: no pragmas on it
    if task.uses_openmp and task.language == "c" and source and parent.toolchain is None:
        moves += pragma_moves(task.kernel, expanded, parent.files)
        moves += wavefront_moves(task.kernel, expanded, parent.files)
        moves += scalar_moves(task.kernel, expanded, parent.files)
    moves += flag_moves(task, parent)
    if task.uses_openmp and task.language in ("c", "cpp") and parent.toolchain is None:
        moves += compiler_moves(parent, source, cores)
    if parent.toolchain is not None:  # a Polly build: only the flags clang takes (its parallel loops are its own)
        moves = [m for m in moves if all(f in CLANG_FLAGS for f in _flags_of(m))]
    if task.uses_openmp and _USES_OMP.search(source):
        moves += count_moves("threads", parent.threads, task.timing.threads, cores)
        moves += bind_moves(parent, _OMP_BIND)
    if task.uses_mpi:
        moves += count_moves("ranks", parent.ranks, task.timing.ranks, cores)
        moves += bind_moves(parent, _MPI_BIND)
    moves += tunable_moves(task, parent)
    return moves


def roofline_adjust(move: Move, roof: Roofline | None) -> float:
    """Reorder by what bounds the parent. Near the bandwidth roof (memory-bound, at least half of it),
    faster instructions cannot help: compute moves drop behind everything else. Compute-bound and far
    from the peak: compute and locality moves come forward. No roofline (a task without [roofline], or
    an untimed parent): the fixed prior."""
    if roof is None:
        return 0.0
    if roof.bound == "memory" and roof.fraction >= 0.5:
        return -40.0 if move.kind == "compute" else 0.0
    if roof.bound == "compute" and roof.fraction < 0.5:
        return 10.0 if move.kind in ("compute", "locality") else 0.0
    return 0.0


def interchange_moves(kernel: str, source: str, files: dict[str, str]) -> list[Move]:
    """Turn accumulator nests inside out for stride-1 inner loops (kernopt/tuner/interchange.py):
    ranked with the best parallel loops, higher the more large-stride references it removes."""
    return [Move(136.0 + 8.0 * x.gain, f"interchange the {x.outer_var} and {x.inner_var} loops (line {x.line + 1}) "
                 f"so the innermost loop walks memory with stride 1", {"files": {**files, kernel: x.source}}, "locality")
            for x in interchanges(source)]


def permutation_moves(kernel: str, source: str, files: dict[str, str], openmp: bool = False) -> list[Move]:
    """Reorder a perfect nest for stride-1 inner loops where isl proves it legal (kernopt/tuner/permute.py):
    the array-accumulator matrix product `C[i][j] += A[i][k] * B[k][j]` goes from i-j-k to i-k-j.
    A loop whose body is statements then one loop (`C[i][j] *= beta;` before the k loop) is split first
    where the dependences allow. Ranked as the accumulator interchange is. Where the new innermost loop sums
    into one element (syrk's `c[i][j] += a[i][p] * a[j][p]` with p innermost), the same permutation with that
    element in a register and a simd reduction (scalar_moves) is a move of its own, ranked just above: the
    stride-1 order alone leaves a serial chain of adds through memory."""
    out = []
    for p in permutations(source):
        what = (f"split the {p.distributed} loop (line {p.line + 1}) after its first statement(s), then permute the "
                f"{'-'.join(p.before)} loops to" if p.distributed else f"permute the {'-'.join(p.before)} loops (line {p.line + 1}) to")
        idea = (f"{what} {'-'.join(p.after)} so the innermost loop walks memory with stride 1 (legal by dependence "
                f"analysis{_assumed(p.assumed)})")
        score = 136.0 + 8.0 * p.gain
        out.append(Move(score, idea, {"files": {**files, kernel: p.source}}, "locality"))
        for sc in (scalarizations(p.source) if openmp else []):
            if sc.var == p.after[-1]:
                out.append(Move(score + 2.0, f"{idea}, then sum into `{sc.target}` in a register with a simd reduction "
                                f"over {sc.var}", {"files": {**files, kernel: sc.source}}, "locality"))
    return out


def scalar_moves(kernel: str, source: str, files: dict[str, str]) -> list[Move]:
    """Scalar replacement of an in-memory accumulator with a vectorized reduction where isl proves it legal
    (kernopt/tuner/scalarize.py): a compute move above the compiler flags, below unroll-and-jam."""
    return [Move(86.0, f"sum into `{sc.target}` in a register with `#pragma omp simd reduction` over the {sc.var} loop "
                 f"(line {sc.line + 1}; legal by dependence analysis{_assumed(sc.assumed)})",
                 {"files": {**files, kernel: sc.source}}, "compute") for sc in scalarizations(source)]


def _assumed(pairs: tuple[tuple[str, str], ...]) -> str:
    return "; assumes " + ", ".join(f"{a} and {b}" for a, b in pairs) + " do not overlap" if pairs else ""


def unroll_moves(kernel: str, source: str, files: dict[str, str]) -> list[Move]:
    """Unroll-and-jam (register blocking) where isl proves it legal (kernopt/tuner/unroll.py): an outer loop
    of a perfect band unrolled by 2 or 4, the copies jammed into the innermost loop, a remainder loop for
    the last iterations. Below permutation, above flags; higher the more references the copies share, for
    a loop whose copies are independent (it carries no dependence), and for the factor 4. A compute move:
    it cuts loads per flop, so it comes forward for compute-bound parents and drops back near the
    bandwidth roof."""
    return [Move(90.0 + 3.0 * min(u.reuse, 4) + (4.0 if u.parallel else 0.0) + (1.0 if u.factor == 4 else 0.0),
                 f"unroll-and-jam {u.var} by {u.factor} into the {u.inner} loop (line {u.line + 1}; register blocking, "
                 f"a remainder loop runs the last {u.var} iterations; legal by dependence analysis{_assumed(u.assumed)})",
                 {"files": {**files, kernel: u.source}}, "compute")
            for u in unroll_jams(source)]


_TILE_PRIOR = {64: 66.0, 128: 65.0, 32: 64.0}


def tiling_moves(kernel: str, source: str, files: dict[str, str], openmp: bool) -> list[Move]:
    """Cache tiling of a fully permutable band of 2 or 3 loops where isl proves it legal
    (kernopt/tuner/tile.py), one move per tile size (32, 64, 128), every loop that carries reuse tiled.
    A locality move, after unroll-and-jam and below -march=native: on this VM's 32 MiB L3 a blocked gemm
    measured slower than the plain interchanged one, so it is tried where the cheaper moves are spent.
    An outer `parallel for` stays on the outermost tile loop (added where that loop carries no dependence)."""
    out = []
    for t in tilings(source, openmp=openmp):
        shape = "x".join([str(t.size)] * len(t.tiled))
        omp = {"kept": "; its parallel for stays on the outermost tile loop",
               "added": "; parallel for on the outermost tile loop, which carries no dependence"}.get(t.pragma, "")
        out.append(Move(_TILE_PRIOR.get(t.size, 60.0), f"tile the {'-'.join(t.band)} loops (line {t.line + 1}) {shape} over "
                        f"{', '.join(t.tiled)} for cache reuse (min() bounds for the last partial tiles{omp}; legal by "
                        f"dependence analysis{_assumed(t.assumed)})", {"files": {**files, kernel: t.source}}, "locality"))
    return out


@functools.lru_cache(maxsize=16)
def _schedules(source: str, openmp: bool) -> tuple[tuple[Scheduled, str], ...]:
    """scheduled_sources, once per source: a run proposes from the same parent several times (each refill of the
    batch), and a product chain's schedules take seconds (docs/tuner.md)."""
    from kernopt.tuner.codegen import scheduled_sources  # kept local: the one place policy.py reaches these modules
    return tuple(scheduled_sources(source, openmp))


def schedule_moves(kernel: str, source: str, files: dict[str, str], openmp: bool) -> list[Move]:
    """Schedules from isl's scheduler with code from isl's AST generator (kernopt/tuner/schedule.py, codegen.py):
    one move per option set (fusion, tile size, parallel member, unroll-and-jam) whose code differs. An untiled,
    unfused schedule that puts the stride-1 loops innermost and runs outer loops in parallel is a permutation move and
    a parallel-for move in one: it ranks above both where it covers every nest of the function (tasks/derived/
    chain2_ab: 8.6x at the first candidate, where the two-step path had 4.1x after five), else below parallel-every-
    nest (the other nests would stay serial), a 3-deep nest above a 2-deep one (corr_derived: the product's nest
    before the means', 1.87x -> 5.08x at budget 8). A schedule that reads the same as one before it ranks 10 lower.
    What today's moves cannot do together (tiling with an outer parallel loop, fusion across nests, a tiled
    wavefront) ranks just below -march=native and above the compilers' own optimizers, at the tile size of 64 only;
    the other sizes, a parallel loop alone (the pragma moves' ground) and unroll-and-jam rank with today's tiling
    moves."""
    out: list[Move] = []
    for s, new in _schedules(source, openmp):
        o, notes = s.options, s.notes
        parallel = any(n.startswith("parallel for") for n in notes)
        fused = s.model.count > 1 and notes[0].startswith("fuse")
        stride = any("stride-1" in n for n in notes)
        sunk = any(n.endswith("innermost, below the loops inside") for n in notes)
        depth = max((len(st.loops) for st in s.model.stmts.values()), default=1)  # the deeper nest has the work
        composite = (150.0 if s.model.whole_function else 140.0 + min(depth, 3)) - (0.5 if o.fusion == "min" else 0.0)
        if parallel and stride and not fused and not o.tile and not o.unroll and not o.wavefront:
            # permuted for stride 1 and parallel: a permutation move and a parallel-for move in one, ranked above both
            # when it covers every nest of the function, else (other nests left serial) below parallel-every-nest
            score = composite
        elif parallel and sunk and o.tile == 64 and not fused and not o.unroll and not o.wavefront:
            # tiles in parallel, a block of the arrays in cache across the loops inside, each tile's stride-1 loop
            # innermost: above the untiled one (tasks/loops, one `kernopt eval` each: trmm_lower_inplace 1.64x ->
            # 4.10x, wcovar 10.5x (untiled) -> 13.0x, tridiag_soa 1.25x (untiled) -> 1.75x)
            score = composite + 2.0
        elif o.tile == 64 and (parallel or fused):
            score = 68.0 + (2.0 if fused else 0.0) + (1.0 if o.wavefront else 0.0) + (0.5 if stride else 0.0)
        elif o.tile:
            score = 61.0 + (1.0 if parallel else 0.0) + {64: 1.0, 32: 0.5}.get(o.tile, 0.0)
        else:
            score = 60.0 + (2.0 if fused else 0.0) + (2.0 if stride else 0.0) - (3.0 if o.unroll else 0.0)
        idea = f"isl schedule: {'; '.join(notes)} (checked against the dependences)"
        if any(m.idea == idea for m in out):  # the same in words (fusion max and min alike on one nest): not in one batch
            score -= 10.0
        out.append(Move(score, idea, {"files": {**files, kernel: new}},
                        "locality" if o.tile or o.unroll or not parallel else "other"))
    return out


def wavefront_moves(kernel: str, source: str, files: dict[str, str]) -> list[Move]:
    """A block wavefront over two loops that both carry a dependence, where isl proves the band fully permutable
    (kernopt/tuner/wavefront.py): the parallel schedule of an in-place sweep (Gauss-Seidel, SOR), whose loops
    get no parallel-for move. Ranked above unroll-and-jam (on 2 cores, threads are worth more), below interchange."""
    return [Move(118.0 if w.size == 64 else 112.0,
                 f"run the {w.loops[0]}-{w.loops[1]} loops (line {w.line + 1}) as a block wavefront: {w.size}x{w.size} "
                 f"tiles, the tiles of one anti-diagonal in parallel (legal by dependence analysis: the band is fully "
                 f"permutable{_assumed(w.assumed)})", {"files": {**files, kernel: w.source}}, "other")
            for w in wavefronts(source)]


def pragma_moves(kernel: str, source: str, files: dict[str, str]) -> list[Move]:
    """OpenMP pragma moves (kernopt/tuner/pragmas.py): parallel for with its variants, every nest at once, simd, and
    clause edits on existing pragmas, on `source` as the analyses read it (the kernel with its macros expanded)."""
    return [Move(score, idea, {"files": {**files, kernel: new}}, kind) for new, score, idea, kind in pragma_edits(source)]


def flag_moves(task: Task, parent: Candidate) -> list[Move]:
    """Extra compiler flags not yet on the parent; -ffast-math only when the task allows it."""
    flags = [*_FLAGS, _FAST_MATH] if task.verify.allow_fast_math else list(_FLAGS)
    return [Move(score, idea, {"cflags": [*parent.cflags, flag]}, "compute" if flag != "-O2" else "other")
            for flag, score, idea in flags if flag not in parent.cflags]


def compiler_moves(parent: Candidate, source: str, cores: int) -> list[Move]:
    """Compilers' own loop optimizers as moves (issue 17, item 3): gcc graphite's polyhedral loop-nest optimizer
    (-floop-nest-optimize: tiling and interchange by isl's scheduler), and, on a kernel with no OpenMP of its
    own, gcc's auto-parallelizer over graphite (-ftree-parallelize-loops=N -floop-parallelize-all) and a build
    with clang's Polly and its parallel loops (Candidate.toolchain): bench/peers.py's "gcc autopar" and "clang
    Polly" peers, so the tuner can always fall back on them. The verifier decides: any of them may change
    nothing, or give a wrong answer, which is refused."""
    out: list[Move] = []
    if "-floop-nest-optimize" not in parent.cflags:
        out.append(Move(46.0, "gcc graphite loop-nest optimizer (-floop-nest-optimize)",
                        {"cflags": [*parent.cflags, "-floop-nest-optimize"]}, "locality"))
    own_omp = bool(_USES_OMP.search(source))
    threads = max(2, cores)
    autopar = [f"-ftree-parallelize-loops={threads}", "-floop-parallelize-all"]
    if not own_omp and not any(f.startswith("-ftree-parallelize-loops") for f in parent.cflags):
        out.append(Move(64.0, f"gcc auto-parallelization over {threads} threads with graphite "
                        "(-ftree-parallelize-loops -floop-parallelize-all)", {"cflags": [*parent.cflags, *autopar]}))
    if not own_omp and source:
        out.append(Move(63.0, "build with clang's Polly (-O3 -march=native -mllvm -polly -mllvm -polly-parallel)",
                        {"toolchain": "polly", "cflags": [f for f in parent.cflags if f in CLANG_FLAGS]}))
    return out


def count_moves(knob: str, current: int | None, default: int, cores: int) -> list[Move]:
    """Timing thread or rank counts among 1..cores (None means the task default)."""
    effective = current or default
    out = []
    for value in sorted({cores, max(1, cores // 2), 1, default}, reverse=True):
        if value == effective or (value > cores and value != default):
            continue
        score = 80.0 if value == cores and value > effective else 15.0 if value == 1 else 40.0
        noun = knob if value != 1 else knob.removesuffix("s")
        out.append(Move(score, f"time with {value} {noun}{' (task default)' if value == default else ''}",
                        {knob: None if value == default else value}))
    return out


def bind_moves(parent: Candidate, options: tuple[tuple[str, float], ...]) -> list[Move]:
    """Thread / rank binding variants."""
    return [Move(score, f"bind {value}", {"bind": value}) for value, score in options if parent.bind != value]


def tunable_moves(task: AnyTask, parent: Candidate) -> list[Move]:
    """Each task tunable value, in the order the task lists them: a -D define for C and CUDA-C, a value
    written into the source for Python solutions (skipped when the parent's source no longer declares it)."""
    source = parent.files.get(task.kernel, "")
    if task.family == "torch":
        declared = declared_knobs(source)
        tunables = [t for t in task.tunables if t.name in declared]
    else:
        tunables = list(task.tunables)
    current = {**knob_values(source), **parent.defines}  # a value the kernel already has is no move
    return [Move(58.0, f"set {t.name}={v}", {"defines": {**parent.defines, t.name: str(v)}})
            for t in tunables for v in t.values if current.get(t.name) != str(v)]
