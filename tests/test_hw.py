"""The hardware probe, [roofline] formulas and the roofline figures on results (kernopt/hw, docs/roofline.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest

from kernopt.errors import TaskError
from kernopt.evaluators.result import EvalResult, Roofline, TimingStats
from kernopt.hw import probe as hw
from kernopt.hw.expr import ExprError, evaluate, parse
from kernopt.hw.roofline import roofline, workers
from kernopt.sandbox import ExecResult, Limits, Sandbox
from kernopt.task import load_task
from tests.conftest import REPO, needs

BUILTIN_CPU = sorted(p.parent for suite in ("openmp", "mpi") for p in (REPO / "tasks" / suite).glob("*/task.toml"))


# ------------------------------------------------------------------------------------------ formulas
@pytest.mark.parametrize("text,values,want", [
    ("2*n^3", {"n": 10}, 2000.0),  # ^ is a power, and binds tighter than * (Python's xor would not)
    ("2*n**3", {"n": 10}, 2000.0),
    ("3*8*n^2", {"n": 640}, 3 * 8 * 640**2),
    ("TSTEPS*2*13*(n-2)^3", {"n": 5, "TSTEPS": 60}, 60 * 2 * 13 * 27),
    ("8*n*(n + 1)/2 + 2*8*NRHS*n", {"n": 3, "NRHS": 32}, 48 + 1536),
    ("-n + +3", {"n": 1}, 2.0),
    ("n^2^2", {"n": 2}, 16.0),  # right-associative, as ** is
    ("1.5e3 * n", {"n": 2}, 3000.0),
    ("0", {"n": 7}, 0.0),
    ("  n  ", {"n": 4}, 4.0),
    ("ceil(n/8)*8", {"n": 17}, 24.0),  # issue 19: a blocked loop's trip count
    ("floor(n/2) * (floor(n/2) + 1) / 2", {"n": 7}, 6.0),
    ("min(n, 64) + max(n - 64, 0, 1)", {"n": 100}, 100.0),
])
def test_formulas_evaluate(text: str, values: dict[str, float], want: float) -> None:
    assert evaluate(text, values) == pytest.approx(want)


@pytest.mark.parametrize("text,message", [
    ("__import__('os').system('true')", "is not allowed"),
    ("n.real", "is not allowed"),
    ("(lambda: 1)()", "is not allowed"),
    ("abs(n)", "is not allowed"),
    ("ceil", "unknown name 'ceil'"),
    ("ceil(n, 2)", "ceil() takes 1 argument(s)"),
    ("min(n)", "min() takes 2-8 argument(s)"),
    ("max(*[n, 1])", "takes 2-8 argument(s)"),
    ("floor(x=n)", "is not allowed"),
    ("n.ceil(2)", "is not allowed"),
    ("n if n else 1", "is not allowed"),
    ("[n]", "is not allowed"),
    ("'n'", "is not allowed"),
    ("True * n", "is not allowed"),
    ("1j * n", "is not allowed"),
    ("n % 3", "is not allowed"),
    ("n // 2", "is not allowed"),
    ("n << 2", "is not allowed"),
    ("n < 2", "is not allowed"),
    ("m * n", "unknown name 'm'"),
    ("2 * n +", "is not an arithmetic expression"),
    ("n; import os", "is not an arithmetic expression"),
    ("n\n+1", "must be one line"),
    ("", "is empty"),
    ("n" + " + n" * 200, "longer than"),
    ("1/(n-4)", "divides by zero"),
    ("10^400 * n", "overflows"),
    ("1e999 * n", "not finite"),
    ("(-8)^(1/3) + n", "fractional power"),
])
def test_bad_formulas_give_one_line(text: str, message: str) -> None:
    with pytest.raises(ExprError) as exc:
        evaluate(text, {"n": 4})
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_parse_names_and_types() -> None:
    parse("NITER*n", ["n", "NITER"])
    with pytest.raises(ExprError, match="unknown name 'NITER'"):
        parse("NITER*n")
    with pytest.raises(ExprError, match="must be a string"):
        parse(3)


def _add_roofline(task_dir: Path, table: str) -> None:
    toml = task_dir / "task.toml"
    toml.write_text(toml.read_text() + "\n[roofline]\n" + table)


def test_task_roofline_table_loads(small_task: Path) -> None:
    _add_roofline(small_task, 'params = {K = 2}\nflops = "K*n^3"\nbytes = "3*8*n^2"\n')
    task = load_task(small_task)
    assert task.roofline is not None
    assert task.roofline.work(160) == (2 * 160**3, 3 * 8 * 160**2)
    assert load_task(REPO / "tests" / "data" / "small_gemm").roofline is None


@pytest.mark.parametrize("table,message", [
    ('flops = "2*m^3"\nbytes = "8"\n', "roofline.flops: unknown name 'm'"),
    ('flops = "2*n^3"\nbytes = "open(n)"\n', "roofline.bytes: 'open(n)' is not allowed"),
    ('flops = "2*n^3"\n', "roofline.bytes: required key is missing"),
    ('flops = "2*n^3"\nbytes = "8"\nflopz = "1"\n', "roofline.flopz: unknown key (typo?)"),
    ('flops = 7\nbytes = "8"\n', "roofline.flops: Input should be a valid string"),
    ('params = {n = 3}\nflops = "n"\nbytes = "8"\n', "roofline.params: parameter name 'n' must be an identifier other than n"),
    ('flops = "n - 1000"\nbytes = "8*n"\n', "roofline.flops: 'n - 1000' is negative (-840) at the timing size n=160"),
    ('flops = "1/(n-160)"\nbytes = "8*n"\n', "roofline.flops: '1/(n-160)' divides by zero at the timing size n=160"),
    ('flops = "0"\nbytes = "0*n"\n', "roofline: flops and bytes are both 0 at the timing size n=160"),
])
def test_bad_roofline_table_gives_one_precise_line(small_task: Path, table: str, message: str) -> None:
    _add_roofline(small_task, table)
    with pytest.raises(TaskError) as exc:
        load_task(small_task)
    assert message in str(exc.value)
    assert "\n" not in str(exc.value) and "task.toml" in str(exc.value)


@pytest.mark.parametrize("path", BUILTIN_CPU, ids=[f"{p.parent.name}/{p.name}" for p in BUILTIN_CPU])
def test_builtin_cpu_tasks_declare_their_work(path: Path) -> None:
    task = load_task(path)
    assert task.roofline is not None, "every openmp and mpi task has a [roofline] table"
    flops, nbytes = task.roofline.work(task.sizes.timing)
    assert nbytes > 0 and flops >= 0
    text = (path / "task.toml").read_text().split("[roofline]", 1)[1]
    assert text.count("# flops:") == 1 and text.count("# bytes:") == 1, "each formula is explained"


# ------------------------------------------------------------------------------------------ arithmetic
def _profile(bandwidth: dict[int, float], peak: dict[int, float]) -> hw.HardwareProfile:
    fp = hw.HostFingerprint(cpu_model="test cpu", cores=max(bandwidth), memory_mb=1024, kernel="k", sandbox="local", compiler="gcc 0")
    return hw.HardwareProfile(fingerprint=fp, bandwidth_gbps=bandwidth, peak_gflops=peak, llc_bytes=1 << 20, array_bytes=4 << 20,
                              reps=1, vector_bits=256, measured_at="2020-01-01T00:00:00+00:00", probe_s=0.1)


PROFILE = _profile({1: 10.0, 2: 16.0, 4: 20.0}, {1: 50.0, 2: 100.0, 4: 200.0})


def test_profile_interpolates_and_clamps() -> None:
    assert PROFILE.bandwidth_at(2) == 16.0 and PROFILE.peak_at(1) == 50.0
    assert PROFILE.bandwidth_at(3) == pytest.approx(18.0) and PROFILE.peak_at(3) == pytest.approx(150.0)
    assert PROFILE.bandwidth_at(16) == 20.0 and PROFILE.peak_at(16) == 200.0  # oversubscribed: no more than all cores
    assert PROFILE.peak_1 == 50.0 and PROFILE.peak_all == 200.0 and PROFILE.bandwidth_all == 20.0
    assert PROFILE.balance == pytest.approx(10.0)


def test_roofline_compute_bound() -> None:
    r = roofline(2e9, 1e8, 0.1, PROFILE, 2)  # 2 GFLOP in 0.1 s; roofs at 2 threads: 100 GFLOP/s, 16 GB/s
    assert r.gflops == pytest.approx(20.0) and r.gbps == pytest.approx(1.0)
    assert r.bound == "compute" and r.bound_s == pytest.approx(0.02) and r.fraction == pytest.approx(0.2)
    assert (r.peak_gflops, r.bandwidth_gbps, r.threads) == (100.0, 16.0, 2)
    assert r.intensity == pytest.approx(20.0)
    assert r.describe() == "1.00 GB/s, 20.0 GFLOP/s; compute-bound, 20% of the bound (peak 100 GFLOP/s at 2 threads)"


def test_roofline_memory_bound() -> None:
    r = roofline(1e8, 3.2e9, 0.5, PROFILE, 1)  # 3.2 GB at 10 GB/s: 0.32 s; 0.1 GFLOP at 50 GFLOP/s: 0.002 s
    assert r.bound == "memory" and r.bound_s == pytest.approx(0.32) and r.fraction == pytest.approx(0.64)
    assert r.gbps == pytest.approx(6.4)
    assert r.describe() == "6.40 GB/s, 0.20 GFLOP/s; memory-bound, 64% of the bound (bandwidth 10.0 GB/s at 1 thread)"
    zero = roofline(0.0, 1e9, 1.0, PROFILE, 4)  # no flops (a histogram): only the memory roof
    assert zero.bound == "memory" and zero.gflops == 0 and zero.fraction == pytest.approx(0.05)
    with pytest.raises(ValueError):
        roofline(1.0, 1.0, 0.0, PROFILE, 1)


def _timing(threads: int | None = None, ranks: int | None = None, median: float = 0.25) -> TimingStats:
    return TimingStats(baseline_s=[1.0] * 5, candidate_s=[median] * 5, baseline_median_s=1.0, candidate_median_s=median, speedup=1 / median,
                       ci_low=3.5, ci_high=4.5, p_value=0.004, paired_low=3.6, threads=threads, ranks=ranks)


def test_workers_follow_the_timing() -> None:
    gemm, dot = load_task(REPO / "tasks" / "openmp" / "gemm"), load_task(REPO / "tasks" / "mpi" / "dot")
    assert workers(gemm, _timing(threads=1)) == 1 and workers(gemm, _timing(threads=2)) == 2
    assert workers(dot, _timing(ranks=3)) == 3


def test_old_logged_results_without_the_field_load() -> None:
    # An eval.json as runs logged it before roofline figures existed.
    old = {"candidate_id": "c1", "status": "ok", "reason": "verified; 2.00x [1.9, 2.1] (faster)", "log": "",
           "verification": {"sizes": [1, 7], "seeds": 5, "threads": [1, 2], "ranks": [], "race_check": "clean", "race_detail": "",
                            "max_abs_err": 0.0, "max_rel_norm_err": 0.0, "timed_outputs_checked": True},
           "timing": {"baseline_s": [1.0] * 5, "candidate_s": [0.5] * 5, "baseline_median_s": 1.0, "candidate_median_s": 0.5,
                      "speedup": 2.0, "ci_low": 1.9, "ci_high": 2.1, "p_value": 0.004, "consistent": True, "threads": 2, "ranks": None},
           "flags": [], "phase_s": {"build": 0.1}}
    r = EvalResult.model_validate_json(json.dumps(old))
    assert r.roofline is None and r.speedup == 2.0 and "roofline" not in r.summary()
    new = r.model_copy(update={"roofline": roofline(2e9, 1e8, 0.5, PROFILE, 2)})
    again = EvalResult.model_validate_json(new.model_dump_json())
    assert again.roofline == new.roofline and again.summary()["roofline"]["bound"] == "compute"


def test_critic_sees_the_roofline() -> None:
    from kernopt.agent.critic import result_vars, standing
    from kernopt.candidate import Candidate
    from kernopt.prompts import render, shared
    from tests.test_llm_policy import SMALL_GEMM, state_for

    task = load_task(SMALL_GEMM)
    state, _ = state_for(task)
    cand = Candidate(files={task.kernel: task.baseline_source()}, author="llm", idea="same")
    r = EvalResult(candidate_id=cand.id, status="ok", timing=_timing(threads=2), roofline=roofline(2e9, 1e8, 0.25, PROFILE, 2))
    v = result_vars(r)
    assert v["roofline"]["line"] == r.roofline.describe() and v["roofline"]["baseline_fraction"] == pytest.approx(0.02)
    text = render("critic", **shared(state), code=task.baseline_source(), diff="", diff_note="", result=v,
                  candidate={"id": cand.id, "idea": "same", "parent": None, "author": "llm", "knobs": cand.knobs()},
                  standing=standing(state, cand))
    assert "compute-bound, 8.0% of the bound (peak 100 GFLOP/s at 2 threads)" in text
    assert "the baseline reaches 2.0% of the same bound" in text and "machine balance of 6.25 flop/byte" in text
    assert result_vars(r.model_copy(update={"roofline": None}))["roofline"] is None


def test_summary_shows_the_best_roofline() -> None:
    from io import StringIO

    from rich.console import Console

    from kernopt.ui import print_eval, print_summary

    roof = roofline(2e9, 1e8, 0.25, PROFILE, 2)
    buf = StringIO()
    console = Console(file=buf, width=200)
    print_summary(console, {"best_candidate": "c1", "best_speedup": 4.0, "best_ci": [3.5, 4.5], "best_significant": True,
                            "best_idea": "tile", "best_roofline": roof.model_dump(), "baseline_roofline_fraction": 0.02,
                            "candidates": 1, "statuses": {"ok": 1}, "elapsed_s": 3.0}, Path("runs/x"))
    print_eval(console, "gemm", EvalResult(candidate_id="c1", status="ok", timing=_timing(threads=2), roofline=roof))
    text = buf.getvalue()
    assert f"roofline: {roof.describe()}; the baseline: 2.0%" in text
    assert f"  roofline: {roof.describe()}\n" in text


# ------------------------------------------------------------------------------------------ the probe
class Counting:
    """A sandbox that counts the commands it runs."""

    def __init__(self, inner: Sandbox) -> None:
        self.inner, self.name, self.cpus, self.runs = inner, inner.name, inner.cpus, 0

    def run(self, command: list[str], workdir: Path, limits: Limits, env: dict[str, str] | None = None) -> ExecResult:
        self.runs += 1
        return self.inner.run(command, workdir, limits, env)

    def session(self, root: Path):  # type: ignore[no-untyped-def]
        import contextlib

        return contextlib.nullcontext(self)


def test_thread_counts_and_parse() -> None:
    assert hw.thread_counts(1) == [1] and hw.thread_counts(2) == [1, 2] and hw.thread_counts(6) == [1, 2, 4, 6]
    assert hw.thread_counts(8) == [1, 2, 4, 8]
    got = hw.parse_output("llc_bytes 100\narray_bytes 400\nvector_bits 256\ncompiler 12.2.0\nbandwidth 1 9.5\npeak 1 40\ndone\n")
    assert (got.llc_bytes, got.array_bytes, got.bandwidth, got.peak, got.done) == (100, 400, {1: 9.5}, {1: 40.0}, True)


class Failing:
    """A sandbox where every command fails."""

    name, cpus = "local", 2.0

    def __init__(self) -> None:
        self.runs = 0

    def run(self, command: list[str], workdir: Path, limits: Limits, env: dict[str, str] | None = None) -> ExecResult:
        self.runs += 1
        return ExecResult(returncode=1, stderr="cc1: fatal error: no space left on device\n")

    def session(self, root: Path):  # type: ignore[no-untyped-def]
        import contextlib

        return contextlib.nullcontext(self)


@needs("gcc")
def test_a_failed_probe_costs_the_figures_not_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNOPT_HW_CACHE", str(tmp_path / "hw"))
    said: list[str] = []
    sb = Failing()
    assert hw.ensure_profile(sb, said.append) is None  # type: ignore[arg-type]
    assert sb.runs == 1 and len(said) == 2 and "measuring memory bandwidth" in said[0]
    assert said[1].startswith("hardware probe failed") and "no space left on device" in said[1] and "\n" not in said[1]
    assert not list((tmp_path / "hw").glob("*.json"))
    with pytest.raises(Exception, match="does not build"):
        hw.probe(sb)  # type: ignore[arg-type]
    # A task without [roofline] measures nothing at all.
    assert hw.profile_for_task(load_task(REPO / "tests" / "data" / "small_gemm"), sb, said.append) is None  # type: ignore[arg-type]
    assert sb.runs == 2 and len(said) == 2


@pytest.mark.slow
@needs("gcc")
def test_probe_runs_in_the_local_sandbox_and_is_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernopt.sandbox.local import LocalSandbox

    monkeypatch.setenv("KERNOPT_HW_CACHE", str(tmp_path / "hw"))
    sb = Counting(LocalSandbox())
    assert hw.cached_profile(sb) is None
    prof = hw.probe(sb)
    assert sb.runs == 2  # compiled and run in the sandbox
    counts = hw.thread_counts(int(sb.cpus))
    assert prof.threads == counts and sorted(prof.peak_gflops) == counts
    # Plausible, not fast: a shared 2-core VM may be slow, but not this slow.
    assert all(v > 0.5 for v in prof.bandwidth_gbps.values()) and all(v > 0.5 for v in prof.peak_gflops.values())
    assert prof.bandwidth_all > 0.2 * prof.bandwidth_at(1) and prof.peak_all > 0.2 * prof.peak_1
    assert prof.array_bytes >= min(4 * prof.llc_bytes, hw.CAP_MB << 20) and prof.array_bytes >= hw.FLOOR_MB << 20
    assert prof.vector_bits in (128, 256, 512) and prof.probe_compiler
    path = hw.cache_path(prof.fingerprint)
    assert path.is_file() and path.parent == tmp_path / "hw"

    again = hw.probe(sb)  # the cache: nothing runs, same numbers
    said: list[str] = []
    assert hw.ensure_profile(sb, said.append) == prof  # nothing measured
    # nothing said, unless this (shared, 2-core) machine was busy while it measured: then exactly the one warning
    assert said == ([] if not prof.busy_signs() else [said[0]]) and all("busy machine" in s for s in said)
    assert sb.runs == 2 and again == prof and hw.cached_profile(sb) == prof
    fresh = hw.probe(sb, refresh=True)
    # A busy refresh does not replace a good cached profile (test_a_busy_refresh_does_not_replace_...)
    kept = fresh.busy_signs() and not prof.busy_signs()
    assert sb.runs == 4 and hw.cached_profile(sb) == (prof if kept else fresh) and fresh.measured_at >= prof.measured_at

    # Another host (here: another compiler) has a profile of its own.
    monkeypatch.setattr(hw, "_gcc_version", lambda: "gcc 99")
    assert hw.cached_profile(sb) is None
    # A corrupt cache file is measured again, not trusted.
    monkeypatch.undo()
    monkeypatch.setenv("KERNOPT_HW_CACHE", str(tmp_path / "hw"))
    path.write_text("{not json")
    assert hw.cached_profile(sb) is None


@pytest.mark.slow
def test_probe_runs_in_the_docker_sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same probe in a container (the image's gcc); skipped without an engine and the image, unless CI requires docker."""
    from kernopt.errors import UserError
    from kernopt.sandbox import get_sandbox

    try:
        sb = get_sandbox("docker", "openmp")
    except UserError as e:
        if os.environ.get("KERNOPT_REQUIRE_DOCKER") == "1":
            raise
        pytest.skip(f"no Docker engine or sandbox image: {e}")
    monkeypatch.setenv("KERNOPT_HW_CACHE", str(tmp_path / "hw"))
    prof = hw.probe(sb)
    assert prof.fingerprint.sandbox == "docker" and prof.fingerprint.compiler.startswith("image ")
    assert prof.threads == hw.thread_counts(int(sb.cpus))
    assert all(v > 0.5 for v in prof.bandwidth_gbps.values()) and all(v > 0.5 for v in prof.peak_gflops.values())
    assert hw.cached_profile(sb) == prof and hw.cache_path(prof.fingerprint).name.startswith("docker-")


@pytest.mark.slow
@needs("gcc")
def test_hw_probe_command(tmp_path: Path) -> None:
    env = {**os.environ, "KERNOPT_HW_CACHE": str(tmp_path / "hw")}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "kernopt", "hw", "probe", *args], capture_output=True, text=True, env=env, timeout=600)

    first = cli("--sandbox", "local", "--json")
    assert first.returncode == 0, first.stderr
    data = json.loads(first.stdout)
    assert data["cached"] is False and Path(data["path"]).is_file() and data["balance_flop_per_byte"] > 0
    second = cli("--sandbox", "local", "--json")
    assert json.loads(second.stdout) == {**data, "cached": True}
    table = cli("--sandbox", "local")
    assert table.returncode == 0 and "triad GB/s" in table.stdout and "cached, measured" in table.stdout
    assert "machine balance" in table.stdout  # (--refresh: the probe() test above measures again)
    bad = cli("--sandbox", "nowhere")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "unknown sandbox" in bad.stderr


# ------------------------------------------------------------------------------------------ evaluations
@pytest.mark.slow
@needs("gcc", "nm", "readelf", "objdump")
def test_evaluation_carries_the_roofline_only_with_a_table(small_task: Path, tmp_path: Path) -> None:
    from kernopt.candidate import Candidate
    from kernopt.config import EvalConfig
    from kernopt.evaluators import get_evaluator
    from kernopt.sandbox.local import LocalSandbox
    from tests.conftest import enterable_tmpdir

    config = EvalConfig(rounds=2, race_check=False)
    plain = load_task(small_task)
    _add_roofline(small_task, 'flops = "2*n^3"\nbytes = "3*8*n^2"\n')
    declared = load_task(small_task)
    with enterable_tmpdir("kernopt-hw-") as root:
        for task, want in ((declared, True), (plain, False)):
            ev = get_evaluator(task, LocalSandbox(), config, root / task.name / str(want), profile=PROFILE)
            try:
                cand = Candidate(files={task.kernel: task.baseline_source()}, author="user")
                r = ev.evaluate(cand)
                assert r.status == "ok" and r.timing is not None, r.reason
                if not want:
                    assert r.roofline is None and "roofline" not in r.summary()
                    continue
                n, t = task.sizes.timing, r.timing.candidate_median_s
                assert r.roofline is not None and r.roofline.seconds == t and r.roofline.threads == r.timing.threads == 2
                assert r.roofline.flops == 2 * n**3 and r.roofline.bytes == 24 * n**2
                assert r.roofline.gflops == pytest.approx(2 * n**3 / t / 1e9)
                assert r.roofline.bound_s == pytest.approx(max(2 * n**3 / 100e9, 24 * n**2 / 16e9))
                assert r.roofline.fraction == pytest.approx(r.roofline.bound_s / t)
                assert r.summary()["roofline"]["bound"] == "compute"
                re = ev.remeasure(cand)  # the winner's re-measurement carries it too
                assert re.roofline is not None and re.roofline.seconds == re.timing.candidate_median_s  # type: ignore[union-attr]
            finally:
                ev.close()


def test_evaluator_without_a_cached_profile_has_no_figures(small_task: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An evaluation never probes: with nothing cached (and none given) a timed result simply has no roofline."""
    from kernopt.config import EvalConfig
    from kernopt.evaluators.c_family.evaluator import CFamilyEvaluator
    from kernopt.sandbox.local import LocalSandbox

    monkeypatch.setenv("KERNOPT_HW_CACHE", str(tmp_path / "empty"))
    _add_roofline(small_task, 'flops = "2*n^3"\nbytes = "3*8*n^2"\n')
    task = load_task(small_task)
    sb = Counting(LocalSandbox())
    ev = CFamilyEvaluator(task, sb, EvalConfig(), tmp_path / "ev")  # type: ignore[arg-type]
    assert ev.roofline_for(_timing(threads=2)) is None and sb.runs == 0
    given = CFamilyEvaluator(task, sb, EvalConfig(), tmp_path / "ev2", profile=PROFILE)  # type: ignore[arg-type]
    got = given.roofline_for(_timing(threads=2, median=0.25))
    assert isinstance(got, Roofline) and got.flops == 2 * 160**3 and got.fraction == pytest.approx(got.bound_s / 0.25)


def test_profile_table_and_the_busy_machine_note() -> None:
    from io import StringIO

    from rich.console import Console

    from kernopt.ui import print_profile

    def shown(prof: hw.HardwareProfile) -> str:
        buf = StringIO()
        print_profile(Console(file=buf, width=200), prof, Path("/c/p.json"), cached=True)
        return buf.getvalue()

    text = shown(PROFILE)
    assert "test cpu, 4 cores" in text and "peak FP64: 50.0 GFLOP/s on 1 core, 200.0 GFLOP/s on 4" in text
    assert "machine balance: 10.0 flop/byte" in text and "cached, measured 2020-01-01" in text and "note:" not in text
    busy = shown(_profile({1: 20.0, 2: 15.0}, {1: 50.0, 2: 100.0}))
    assert "more threads gave less bandwidth" in busy


def test_a_peak_that_did_not_scale_marks_the_profile_busy() -> None:
    """FMA peak scales with cores on an idle machine: 2 threads at 1.1x one thread's rate means someone else ran."""
    calm = _profile({1: 20.0, 2: 35.0}, {1: 50.0, 2: 99.0})
    assert calm.busy_signs() == ""
    busy = _profile({1: 20.0, 2: 35.0}, {1: 50.0, 2: 55.0})
    assert "2 threads reached only 1.1x one thread's FLOP/s" in busy.busy_signs()
    said: list[str] = []
    with mock.patch.object(hw, "cached_profile", return_value=busy):
        assert hw.ensure_profile(object(), said.append) is busy  # type: ignore[arg-type]
    assert len(said) == 1 and "kernopt hw probe --refresh" in said[0]


def test_a_busy_refresh_does_not_replace_a_good_cached_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache is shared by every user of the host: a refresh measured while the machine was busy keeps the
    good profile (saying so in one line) unless told to replace it; a good or a first measurement is saved."""
    monkeypatch.setenv("KERNOPT_HW_CACHE", str(tmp_path / "hw"))
    good = PROFILE
    busy = _profile({1: 10.0, 2: 7.0, 4: 6.0}, {1: 50.0, 2: 100.0, 4: 200.0})
    assert busy.busy_signs() and not good.busy_signs()
    fp = good.fingerprint
    said: list[str] = []
    with mock.patch.object(hw, "fingerprint", return_value=fp):
        with mock.patch.object(hw, "measure", return_value=good):
            assert hw.probe(object(), refresh=True, say=said.append) == good  # type: ignore[arg-type]
        assert hw.cached_profile(object()) == good  # type: ignore[arg-type]
        with mock.patch.object(hw, "measure", return_value=busy):
            assert hw.probe(object(), refresh=True, say=said.append) == good  # type: ignore[arg-type]
            assert hw.cached_profile(object()) == good  # type: ignore[arg-type]
            assert len(said) == 1 and said[0].startswith("kept the cached hardware profile measured 2020-01-01")
            assert "more threads gave less bandwidth" in said[0] and "--replace" in said[0]
            assert hw.probe(object(), refresh=True, replace=True) == busy  # type: ignore[arg-type]
            assert hw.cached_profile(object()) == busy  # type: ignore[arg-type]
            # a busy one replaces a busy one: nothing good to keep
            busier = busy.model_copy(update={"measured_at": "2021-01-01T00:00:00+00:00"})
        with mock.patch.object(hw, "measure", return_value=busier):
            assert hw.probe(object(), refresh=True, say=said.append) == busier  # type: ignore[arg-type]
        assert len(said) == 1
