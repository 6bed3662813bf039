"""compare() and the driver's result file: tolerances, NaN, integers, truncation, the nonce."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kernopt.evaluators.compare import compare, load_outputs, read_result
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
def _write(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines))


SETUP = json.dumps({"setup": 3, "bufs": [{"name": "a", "dtype": 0, "role": 0, "count": 9},
                                         {"name": "c", "dtype": 0, "role": 1, "count": 9}]})


def _call(i: int) -> str:
    return json.dumps({"n": 3, "seed": 100 + i, "call": i, "warmup": False, "time": 0.001 * (i + 1),
                       "mutated": None, "file": f"c_3_{100 + i}.bin"})


def test_read_result_complete_with_nonce(tmp_path: Path) -> None:
    p = tmp_path / "result.jsonl"
    _write(p, [SETUP, _call(0), _call(1), json.dumps({"done": "n0nce"})])
    run = read_result(p, "n0nce")
    assert run.complete and len(run.calls) == 2 and run.layouts[3][1]["name"] == "c"
    assert run.calls[1].seed == 101 and run.calls[1].time == pytest.approx(0.002) and run.calls[1].mutated is None


def test_read_result_requires_the_nonce(tmp_path: Path) -> None:
    p = tmp_path / "result.jsonl"
    _write(p, [SETUP, _call(0), json.dumps({"done": "forged"})])
    assert not read_result(p, "n0nce").complete
    _write(p, [SETUP, _call(0)])  # exited before the end
    assert not read_result(p, "n0nce").complete


def test_read_result_tolerates_truncated_last_line(tmp_path: Path) -> None:
    p = tmp_path / "result.jsonl"
    p.write_text(SETUP + "\n" + _call(0) + "\n" + _call(1)[:25])
    run = read_result(p, "n0nce")
    assert len(run.calls) == 1 and not run.complete


def test_read_result_ignores_everything_after_a_bad_line(tmp_path: Path) -> None:
    """A done line after garbage (say, a kernel that wrote into the file) does not count."""
    p = tmp_path / "result.jsonl"
    _write(p, [SETUP, _call(0), "{garbage", _call(1), json.dumps({"done": "n0nce"})])
    run = read_result(p, "n0nce")
    assert len(run.calls) == 1 and not run.complete


def test_read_result_missing_file(tmp_path: Path) -> None:
    run = read_result(tmp_path / "nothing.jsonl", "n0nce")
    assert not run.complete and run.calls == [] and run.layouts == {}


def test_read_result_records_mutation(tmp_path: Path) -> None:
    p = tmp_path / "result.jsonl"
    rec = json.loads(_call(0))
    rec["mutated"] = "a"
    _write(p, [SETUP, json.dumps(rec), json.dumps({"done": "x"})])
    assert read_result(p, "x").calls[0].mutated == "a"


def test_load_outputs_skips_inputs_and_checks_size(tmp_path: Path) -> None:
    layout = [{"name": "a", "dtype": 0, "role": 0, "count": 4}, {"name": "c", "dtype": 0, "role": 1, "count": 3},
              {"name": "h", "dtype": 2, "role": 2, "count": 2}]
    (tmp_path / "out.bin").write_bytes(f64(1.0, 2.0, 3.0).tobytes() + np.array([7, 8], dtype=np.int32).tobytes())
    arrays = load_outputs(tmp_path, "out.bin", layout)
    assert list(arrays) == ["c", "h"] and arrays["c"].tolist() == [1.0, 2.0, 3.0] and arrays["h"].tolist() == [7, 8]
    (tmp_path / "short.bin").write_bytes(f64(1.0, 2.0).tobytes())
    with pytest.raises(ValueError, match="truncated"):
        load_outputs(tmp_path, "short.bin", layout)
