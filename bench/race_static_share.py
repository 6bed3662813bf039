"""What share of kernels the static race check (kernopt/evaluators/c_family/race_static.py) proves race-free, and
how long it takes.

Sets: the race suite (tests/race_suite, racy and race-free), the racy hacks tests/hacks/h17*, the dodges and controls
of tests/data/race_static, the red-team race kernels tests/redteam_race (where present), the OpenMP baselines
(tasks/openmp, tasks/loops) and the tuner's OpenMP candidates on them (its `parallel for`, wavefront and tiling
moves, as proposed, before evaluation), and the LLM-written OpenMP kernels of the repository's fixtures: the real
model's executor answers in tests/scenarios/real_gemm.yaml (relay transcript; all verified) and the scripted answers
in tests/scenarios/gemm_improves.yaml. Each kernel is checked as written and as gcc preprocesses it for the race
check (race.restore_includes of `gcc -fopenmp -E -dD`), when gcc is installed.

    python bench/race_static_share.py [--no-preprocess]
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kernopt.evaluators.c_family.race import restore_includes  # noqa: E402
from kernopt.evaluators.c_family.race_static import check  # noqa: E402
from kernopt.tuner.cmacros import expand  # noqa: E402
from kernopt.tuner.policy import pragma_moves, tiling_moves, wavefront_moves  # noqa: E402

_CODE = re.compile(r"```c[^\n]*\n(.*?)```", re.S)


def preprocessed(source: str) -> str | None:
    """The kernel as the race check builds it (gcc -E -dD, includes put back); None if gcc fails."""
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "kernel.c").write_text(source)
        r = subprocess.run(["gcc", "-fopenmp", "-E", "-dD", "kernel.c"], cwd=d, capture_output=True, text=True)
        if r.returncode != 0:
            return None
        return restore_includes(r.stdout, source)


def fixtures() -> list[tuple[str, str, str]]:
    """(set, name, source) for every kernel measured."""
    out: list[tuple[str, str, str]] = []
    suite = REPO / "tests/race_suite"
    for k in tomllib.loads((suite / "manifest.toml").read_text())["kernel"]:
        out.append(("race suite, racy" if k["racy"] else "race suite, race-free", k["file"],
                    (suite / "kernels" / k["file"]).read_text()))
    for p in sorted((REPO / "tests/hacks").glob("h17*.c")):
        out.append(("hacks h17 (racy or runtime calls)", p.name, p.read_text()))
    for p in sorted((REPO / "tests/data/race_static").glob("*.c")):
        out.append(("dodges (racy)" if p.name.startswith("dodge") else "controls (race-free)", p.name, p.read_text()))
    for p in sorted((REPO / "tests/redteam_race").glob("rr*.c")):
        out.append(("red team race kernels", p.name, p.read_text()))
    for task in sorted([*(REPO / "tasks/openmp").glob("*/kernel.c"), *(REPO / "tasks/loops").glob("*/kernel.c")]):
        name = f"{task.parent.parent.name}/{task.parent.name}"
        source = task.read_text()
        out.append(("task baselines", name, source))
        expanded = expand(source)
        moves = [*pragma_moves("kernel.c", expanded, {}), *wavefront_moves("kernel.c", expanded, {}),
                 *tiling_moves("kernel.c", expanded, {}, True)]
        seen: set[str] = set()
        for m in moves:
            files = m.changes.get("files")
            new = files.get("kernel.c") if isinstance(files, dict) else None
            if isinstance(new, str) and "omp parallel" in new and new not in seen:
                seen.add(new)
                out.append(("tuner candidates (parallel)", f"{name}: {m.idea[:60]}", new))
    for scenario, label in (("real_gemm.yaml", "LLM, real model (relay transcript, verified)"),
                            ("gemm_improves.yaml", "LLM, scripted answers")):
        data = yaml.safe_load((REPO / "tests/scenarios" / scenario).read_text())
        steps = data.get("steps", data) if isinstance(data, dict) else data
        n = 0
        for step in steps:
            for code in _CODE.findall(str(step.get("content", ""))):
                if "omp" in code:
                    n += 1
                    out.append((label, f"{scenario} #{n}", code))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-preprocess", action="store_true", help="check the sources as written only")
    ap.add_argument("-v", "--verbose", action="store_true", help="one line per kernel")
    args = ap.parse_args()
    use_gcc = not args.no_preprocess and shutil.which("gcc") is not None
    table: dict[str, Counter[str]] = {}
    times: list[float] = []
    mismatched: list[str] = []
    for group, name, source in fixtures():
        t0 = time.perf_counter()
        v = check(source)
        times.append((time.perf_counter() - t0) * 1000)
        verdict = v.verdict
        if use_gcc:
            pp = preprocessed(source)
            if pp is not None:
                w = check(pp)
                if w.verdict != verdict:
                    mismatched.append(f"{name}: {verdict} as written, {w.verdict} preprocessed")
                    verdict = w.verdict if w.verdict != "proven" else verdict  # the stricter of the two
        table.setdefault(group, Counter())[verdict] += 1
        if args.verbose:
            first = f"  line {v.findings[0].line}: `{v.findings[0].name}` {v.findings[0].why}" if v.findings else ""
            print(f"{group:45s} {name[:70]:70s} {verdict}{first}")
    print("| set | kernels | proven | race | unknown | none | proven share |\n|---|---|---|---|---|---|---|")
    for group, c in table.items():
        total = sum(c.values())
        judged = total - c["none"]
        share = f"{100 * c['proven'] / judged:.0f}%" if judged else "-"
        print(f"| {group} | {total} | {c['proven']} | {c['race']} | {c['unknown']} | {c['none']} | {share} |")
    print(f"\nchecker time per kernel (as written): median {statistics.median(times):.1f} ms, "
          f"max {max(times):.1f} ms, over {len(times)} kernels")
    if mismatched:
        print("verdicts that differ between the source and its preprocessed form:\n  " + "\n  ".join(mismatched))
    elif use_gcc:
        print("every kernel got the same verdict as written and as gcc preprocessed it")


if __name__ == "__main__":
    main()
