"""compare() and the driver's result file: tolerances, NaN, integers, truncation, the nonce."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kernopt.evaluators.c_family.compare import Call, ReportError, compare, keyed_hash, load_outputs, read_report
from kernopt.task import Verify

LOOSE = {"rtol": 0.0, "atol": 0.0, "norm_rtol": 1.0}


def tol(**kw: float) -> Verify:
    return Verify(**kw)  # type: ignore[arg-type]


def f64(*xs: float) -> np.ndarray:
    return np.array(xs, dtype=np.float64)


def test_identical_passes() -> None:
    ref = np.linspace(-1.0, 1.0, 101)
    mismatch, abs_err, norm_err = compare({"c": ref.copy()}, {"c": ref}, tol())
    assert mismatch is None and abs_err == 0.0 and norm_err == 0.0


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_output_never_passes(dtype: type, bad: float) -> None:
    ref = np.arange(1.0, 11.0, dtype=dtype)
    got = ref.copy()
    got[3] = bad
    mismatch, abs_err, _ = compare({"c": got}, {"c": ref}, tol(rtol=1e9, atol=1e9, norm_rtol=1e9))
    assert mismatch is not None and "not written or not finite" in mismatch.message
    assert "index 3" in mismatch.message and abs_err == float("inf")


def test_all_nan_output_reports_count() -> None:
    ref = np.ones(8)
    mismatch, _, _ = compare({"c": np.full(8, np.nan)}, {"c": ref}, tol())
    assert mismatch is not None and "8 of 8" in mismatch.message


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("got_value", [1.0, -np.inf, np.nan])
def test_non_finite_reference_needs_the_same_value(got_value: float) -> None:
    ref = f64(1.0, np.inf, 3.0)
    got = f64(1.0, got_value, 3.0)
    mismatch, _, _ = compare({"c": got}, {"c": ref}, tol())
    assert mismatch is not None


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_matching_infinities_pass() -> None:
    ref = f64(1.0, np.inf, -np.inf)
    assert compare({"c": ref.copy()}, {"c": ref}, tol(norm_rtol=1.0))[0] is None


def test_atol_boundary() -> None:
    # Exactly representable numbers: the bound is inclusive, one ulp beyond it is not.
    ref = f64(0.0, 2.0)
    ok = compare({"c": f64(0.5, 2.0)}, {"c": ref}, tol(**{**LOOSE, "atol": 0.5}))
    assert ok[0] is None and ok[1] == 0.5
    over = compare({"c": f64(np.nextafter(0.5, 1.0), 2.0)}, {"c": ref}, tol(**{**LOOSE, "atol": 0.5}))
    assert over[0] is not None and "outside tolerance" in over[0].message and "index 0" in over[0].message


def test_rtol_boundary() -> None:
    ref = f64(4.0, -8.0)
    t = tol(**{**LOOSE, "rtol": 0.25})
    assert compare({"c": f64(5.0, -10.0)}, {"c": ref}, t)[0] is None  # |err| == rtol * |ref|, both elements
    mismatch = compare({"c": f64(5.0, np.nextafter(-10.0, -11.0))}, {"c": ref}, t)[0]
    assert mismatch is not None and "1 of 2" in mismatch.message and "index 1" in mismatch.message


def test_bound_is_atol_plus_rtol() -> None:
    ref = f64(2.0)
    t = tol(**{**LOOSE, "rtol": 0.25, "atol": 0.5})  # bound = 0.5 + 0.25 * 2 = 1.0
    assert compare({"c": f64(3.0)}, {"c": ref}, t)[0] is None
    assert compare({"c": f64(3.25)}, {"c": ref}, t)[0] is not None


def test_tiny_relative_error_outside_default_tolerance() -> None:
    """float32-level rounding of a double result is caught by the default tolerances."""
    rng = np.random.default_rng(0)
    ref = rng.uniform(-1.0, 1.0, 1000)
    got = ref.astype(np.float32).astype(np.float64)
    mismatch, abs_err, _ = compare({"c": got}, {"c": ref}, tol())
    assert mismatch is not None and 0 < abs_err < 1e-7


def test_norm_tolerance_catches_uniform_small_errors() -> None:
    """Every element within rtol, but the whole output drifts: the norm check catches it."""
    ref = np.ones(100)
    got = ref * (1.0 + 0.9e-6)
    t = tol(rtol=1e-6, atol=0.0, norm_rtol=1e-7)
    mismatch, _, norm_err = compare({"c": got}, {"c": ref}, t)
    assert mismatch is not None and "relative norm error" in mismatch.message
    assert norm_err == pytest.approx(0.9e-6, rel=1e-3)
    assert compare({"c": got}, {"c": ref}, tol(rtol=1e-6, atol=0.0, norm_rtol=1e-5))[0] is None


def test_norm_error_with_zero_reference_is_absolute() -> None:
    """Against an all-zero reference the norm error is absolute, and the norm bound's floor is the
    elementwise atol's (atol * sqrt(n)): it never rejects what every element's tolerance allows."""
    ref = np.zeros(4)
    got = f64(0.0, 1e-3, 0.0, 0.0)
    mismatch, _, norm_err = compare({"c": got}, {"c": ref}, tol(rtol=0.0, atol=1e-3, norm_rtol=1e-4))
    assert norm_err == pytest.approx(1e-3) and mismatch is None
    mismatch, _, _ = compare({"c": got}, {"c": ref}, tol(rtol=0.0, atol=5e-4, norm_rtol=1e-4))
    assert mismatch is not None and "outside tolerance" in mismatch.message


def test_norm_bound_catches_errors_spread_within_elementwise_tolerance() -> None:
    ref = np.ones(10_000)
    got = ref + 1e-6  # every element within rtol 1e-5, the whole output off by 1e-6 relative
    mismatch, _, _ = compare({"c": got}, {"c": ref}, tol(rtol=1e-5, atol=1e-12, norm_rtol=1e-7))
    assert mismatch is not None and "relative norm error" in mismatch.message


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_integers_compare_exactly(dtype: type) -> None:
    ref = np.arange(10, dtype=dtype)
    loose = tol(rtol=1.0, atol=100.0, norm_rtol=1.0)  # tolerances do not apply to integers
    assert compare({"h": ref.copy()}, {"h": ref}, loose)[0] is None
    got = ref.copy()
    got[7] += 1
    mismatch = compare({"h": got}, {"h": ref}, loose)[0]
    assert mismatch is not None and "1 of 10 elements differ" in mismatch.message and "index 7" in mismatch.message


def test_missing_or_resized_output() -> None:
    ref = np.ones(4)
    assert "missing" in compare({}, {"c": ref}, tol())[0].message  # type: ignore[union-attr]
    assert "wrong size" in compare({"c": np.ones(3)}, {"c": ref}, tol())[0].message  # type: ignore[union-attr]


def test_every_output_is_compared() -> None:
    ref = {"a": np.ones(3), "b": np.ones(3)}
    got = {"a": np.ones(3), "b": f64(1.0, 2.0, 1.0)}
    mismatch = compare(got, ref, tol())[0]
    assert mismatch is not None and "'b'" in mismatch.message


# ---------------------------------------------------------------- the driver's files
SETUP = json.dumps({"setup": 3, "ranks": 1, "bufs": [{"name": "a", "dtype": 0, "role": 0, "count": 9},
                                                     {"name": "c", "dtype": 0, "role": 1, "count": 9}]})


def _call(i: int, **over: object) -> str:
    rec = {"call": i, "n": 3, "seed": 100 + i, "record": 1, "time": 0.001 * (i + 1), "cpu_in": 0.001, "cpu_out": 0.0005,
           "others": -0.0004, "mutated": None, "bytes": 72, "key": 5, "hash": 7, **over}
    return json.dumps(rec)


def report(*lines: str) -> str:
    return "".join(line + "\n" for line in lines)


def test_read_report_complete_with_nonce() -> None:
    run = read_report(report(SETUP, _call(0), _call(1), json.dumps({"done": "n0nce"})), "n0nce")
    assert run.complete and not run.error and len(run.calls) == 2 and run.layouts[3][1]["name"] == "c"
    c = run.calls[1]
    assert c.seed == 101 and c.time == pytest.approx(0.002) and c.mutated is None and c.file == "o_1.bin"
    assert (c.cpu_in, c.cpu_out, c.nbytes, c.key, c.digest) == (0.001, 0.0005, 72, 5, 7)
    assert c.others == -0.0004  # the rest of the machine's CPU in the window, in clock ticks: may be a tick below 0


def test_others_the_monitor_could_not_read_is_none() -> None:
    """The monitor prints null when /proc/stat cannot be read (and an old report has no field): None, which the
    busy-machine rule treats as disturbed (fails closed)."""
    run = read_report(report(SETUP, _call(0, others=None), json.dumps({"done": "x"})), "x")
    assert run.complete and run.calls[0].others is None


def test_read_report_requires_the_nonce() -> None:
    assert not read_report(report(SETUP, _call(0), json.dumps({"done": "forged"})), "n0nce").complete
    assert not read_report(report(SETUP, _call(0)), "n0nce").complete  # stopped before the end


def test_a_warm_up_call_names_no_file() -> None:
    run = read_report(report(SETUP, _call(0, record=0), json.dumps({"done": "x"})), "x")
    assert run.calls[0].warmup and run.calls[0].file == ""


def test_the_monitors_error_is_the_reason() -> None:
    run = read_report(report(SETUP, json.dumps({"exit": {"signal": 31, "code": -1}}),
                             json.dumps({"error": "the measured program was killed by SIGSYS"})), "x")
    assert not run.complete and run.error == "the measured program was killed by SIGSYS"


@pytest.mark.parametrize("bad", [
    "{garbage", "[1, 2]", json.dumps({"surprise": 1}),
    _call(1),  # out of order
    _call(0, n=4),  # not the size set up
    _call(0, time=-1.0), _call(0, time="fast"), _call(0, others="idle"), _call(0, others=-1e8),
    _call(0, seed=2**64), _call(0, record=2), _call(0, mutated=["a"]),
    _call(0, bytes=True), json.dumps({"setup": 3, "bufs": [{"name": "../x", "dtype": 9, "role": 1, "count": 1}]}),
    json.dumps({"setup": 3, "bufs": [{"name": "c", "dtype": 0, "role": 1, "count": 1, "file": "/etc/shadow"}]}),
    json.dumps({"setup": 3, "bufs": "x"}), json.dumps({"call": "crash"}), "{" * 100000 + "}" * 100000,
])
def test_a_malformed_report_is_an_error_never_an_exception(bad: str) -> None:
    run = read_report(report(SETUP, bad, _call(0), json.dumps({"done": "x"})), "x")
    assert not run.complete and run.error.startswith("malformed monitor report")


def _file(tmp_path: Path, values: np.ndarray, key: int = 12345) -> Call:
    data = values.tobytes()
    (tmp_path / "o_0.bin").write_bytes(data)
    digest, _ = keyed_hash(data, key, 0)
    return Call(n=3, seed=1, time=0.1, warmup=False, mutated=None, file="o_0.bin", nbytes=len(data), key=key, digest=digest)


LAYOUT: list[dict[str, object]] = [{"name": "a", "dtype": 0, "role": 0, "count": 4}, {"name": "c", "dtype": 0, "role": 1, "count": 3}]


def test_load_outputs_checks_size_and_the_monitors_hash(tmp_path: Path) -> None:
    call = _file(tmp_path, f64(1.0, 2.0, 3.0))
    assert load_outputs(tmp_path, call, LAYOUT)["c"].tolist() == [1.0, 2.0, 3.0]
    (tmp_path / "o_0.bin").write_bytes(f64(1.0, 2.0, 4.0).tobytes())  # rewritten after the monitor wrote it
    with pytest.raises(ReportError, match="changed after the monitor wrote it"):
        load_outputs(tmp_path, call, LAYOUT)
    (tmp_path / "o_0.bin").write_bytes(f64(1.0, 2.0).tobytes())
    with pytest.raises(ReportError, match="not the file the monitor wrote"):
        load_outputs(tmp_path, call, LAYOUT)


def test_load_outputs_never_follows_a_link_or_reads_a_device(tmp_path: Path) -> None:
    call = _file(tmp_path, f64(1.0, 2.0, 3.0))
    (tmp_path / "o_0.bin").unlink()
    (tmp_path / "o_0.bin").symlink_to("/etc/passwd")
    with pytest.raises(ReportError, match="missing"):
        load_outputs(tmp_path, call, LAYOUT)
    (tmp_path / "o_0.bin").unlink()
    (tmp_path / "o_0.bin").symlink_to("/dev/zero")
    with pytest.raises(ReportError):
        load_outputs(tmp_path, call, LAYOUT)


def test_load_outputs_size_comes_from_the_layout_not_the_report(tmp_path: Path) -> None:
    call = _file(tmp_path, f64(1.0, 2.0, 3.0))
    call.nbytes = 1 << 30
    with pytest.raises(ReportError, match="output bytes"):
        load_outputs(tmp_path, call, LAYOUT)


def test_keyed_hash_matches_the_monitor(tmp_path: Path) -> None:
    """The C monitor's NH hash and the host's agree (odd lengths zero-padded per buffer)."""
    import shutil
    import subprocess

    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    src = Path(__file__).resolve().parent.parent / "kernopt" / "evaluators" / "c_family" / "c"
    prog = tmp_path / "nh"
    harness = tmp_path / "nh.c"
    harness.write_text('#include <stdio.h>\n#define main monitor_main\n#include "monitor.c"\n#undef main\n'
                       'int main(void) { unsigned char b[13]; for (int i = 0; i < 13; i++) b[i] = (unsigned char)(i * 37 + 1);\n'
                       ' uint64_t w = 0, h = nh(99, b, 13, &w, 0); h = nh(99, b, 5, &w, h); printf("%llu %llu\\n",'
                       ' (unsigned long long)h, (unsigned long long)w); return 0; }\n')
    subprocess.run(["gcc", "-I", str(src), str(harness), "-o", str(prog)], check=True)
    h, w = map(int, subprocess.run([str(prog)], capture_output=True, text=True, check=True).stdout.split())
    data = bytes((i * 37 + 1) % 256 for i in range(13))
    h1, w1 = keyed_hash(data, 99, 0)
    h2, w2 = keyed_hash(data[:5], 99, w1)
    assert (h, w) == ((h1 + h2) % 2**64, w2)


def test_per_output_tolerances_fall_back_to_the_task_wide_ones() -> None:
    """[verify.outputs.NAME]: labels exact, distances at 1e-12, others at the task's rtol."""
    v = Verify.model_validate({"rtol": 1e-6, "atol": 0.0, "norm_rtol": 1.0,
                               "outputs": {"dist": {"rtol": 1e-12}, "labels": {"rtol": 0.0, "atol": 0.0}}})
    ref = f64(1.0, 2.0, 3.0)
    off = ref * (1 + 1e-9)  # within the task-wide 1e-6, not within 1e-12
    assert compare({"dist": ref.copy(), "other": off}, {"dist": ref, "other": ref}, v)[0] is None
    m = compare({"dist": off, "other": ref.copy()}, {"dist": ref, "other": ref}, v)[0]
    assert m is not None and "'dist'" in m.message and "outside tolerance" in m.message
    m = compare({"labels": off}, {"labels": ref}, v)[0]
    assert m is not None and "'labels'" in m.message
    assert v.tolerances("dist") == (1e-12, 0.0, 1.0) and v.tolerances("other") == (1e-6, 0.0, 1.0)


def test_comparison_range_compares_only_the_named_part() -> None:
    """[verify.outputs.L] range = ["0", "n*(n+1)/2"]: a packed triangle; the rest is not compared (NaN there passes),
    and a wrong element inside the range is reported at its index in the whole buffer."""
    v = Verify.model_validate({"outputs": {"L": {"range": ["n", "n*(n+1)/2"]}}})
    n = 4
    ref = np.arange(1.0, 21.0)
    got = ref.copy()
    got[:n] = np.nan  # before the range
    got[10:] = -1.0  # after it
    assert compare({"L": got}, {"L": ref}, v, n=n)[0] is None
    got[7] = 0.0
    m = compare({"L": got}, {"L": ref}, v, n=n)[0]
    assert m is not None and "index 7" in m.message and "1 of 6 elements" in m.message
    assert compare({"L": ref.copy()}, {"L": ref}, v)[0] is None  # without a size: the whole buffer
    m = compare({"L": got}, {"L": ref}, v)[0]
    assert m is not None and "index 0" in m.message
    # clamped to the buffer: a range past its end compares what there is
    wide = Verify.model_validate({"outputs": {"L": {"range": ["0", "100*n"]}}})
    assert wide.part("L", 4, 20) == slice(0, 20) and wide.part("other", 4, 20) == slice(0, 20)


@pytest.mark.parametrize("which,kept", [("lower", [0, 3, 4, 6, 7, 8]), ("upper", [0, 1, 2, 4, 5, 8])])
def test_triangle_compares_only_that_triangle(which: str, kept: list[int]) -> None:
    """[verify.outputs.L] triangle = "lower": a full row-major n x n matrix of which only j <= i is compared."""
    v = Verify.model_validate({"outputs": {"L": {"triangle": which}}})
    ref = np.arange(1.0, 10.0)  # 3 x 3
    got = np.full(9, np.nan)
    got[kept] = ref[kept]
    assert compare({"L": got}, {"L": ref}, v, n=3)[0] is None
    m = compare({"L": got}, {"L": ref}, v)[0]  # without a size: the whole matrix
    assert m is not None
    got[kept[-2]] += 1.0
    m = compare({"L": got}, {"L": ref}, v, n=3)[0]
    assert m is not None and f"index {kept[-2]}" in m.message and "1 of 6 elements" in m.message
    with pytest.raises(ValueError, match="give one of them"):
        Verify.model_validate({"outputs": {"L": {"triangle": which, "range": ["0", "n"]}}})
