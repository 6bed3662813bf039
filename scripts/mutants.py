"""Guard mutations (issue 16): remove each guard on a copy of the tree and check its tests notice.

    .venv/bin/python scripts/mutants.py            # every mutation; exit 1 when one survives or does not apply
    .venv/bin/python scripts/mutants.py ID...      # only these
    .venv/bin/python scripts/mutants.py --list     # the ids

Each mutation copies the tracked files of the working tree to a temporary directory, replaces one exact
text (which must occur exactly once), and runs only the named tests there, with the copy's `kernopt`
imported (PYTHONPATH and the rootdir are the copy; the venv's editable install of this checkout comes
after both). A mutation is caught when those tests fail. Add one with every new guard: see
docs/verification.md, "Guard mutations".
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutation:
    id: str
    file: str  # relative to the repository root
    old: str  # must occur exactly once in the file
    new: str
    tests: tuple[str, ...]  # pytest node ids that must fail with the guard removed


C = "kernopt/evaluators/c_family/"
MUTATIONS = [
    Mutation("weak_undefined_symbols", C + "static_gate.py", 'if kind in ("U", "w"):', 'if kind in ("U",):',
             ("tests/test_guards.py::test_weak_undefined_reference_is_refused",)),
    Mutation("significant_needs_consistent", "kernopt/evaluators/result.py", "\n                and self.consistent)", ")",
             ("tests/test_guards.py::test_inconsistent_timing_is_never_significant",)),
    Mutation("norm_bound_atol_floor", C + "compare.py",
             "norm_err * ref_norm > norm_rtol * ref_norm + atol * np.sqrt(r64.size)", "True",
             ("tests/test_guards.py::test_norm_bound_has_the_atol_floor",)),
    Mutation("bootstrap_resamples_processes", "kernopt/evaluators/stats.py",
             "return _resampled_medians(_groups(baseline), rng, resamples) / _resampled_medians(_groups(candidate), rng, resamples)",
             "return (_resampled_medians(list(np.concatenate(_groups(baseline)).reshape(-1, 1)), rng, resamples)\n"
             "            / _resampled_medians(list(np.concatenate(_groups(candidate)).reshape(-1, 1)), rng, resamples))",
             ("tests/test_guards.py::test_bootstrap_resamples_processes_not_calls",)),
    Mutation("resume_restores_spend", "kernopt/optimize.py", "spend=store.spend())", "spend=None)",
             ("tests/test_resume.py::test_resume_restores_model_spend",)),
    Mutation("source_gate_forbids_system", C + "static_gate.py", '    "system": "running commands",\n', "",
             ("tests/test_static_gate.py::test_forbidden_calls[system]",)),
    Mutation("capability_mpi_comm_spawn", C + "static_gate.py", "|Comm_spawn\\w*|", "|",
             ("tests/test_redteam.py::test_attack[rd3_mpi_comm_spawn-local]",)),
    Mutation("output_poisoning", C + "c/driver.c", "if (bufs[i].role == KO_OUT) ko_poison(&bufs[i], c.call);",
             "if (bufs[i].role == KO_OUT) (void)ko_poison;", ("tests/test_hacks.py::test_hack[h07_never_writes]",)),
    Mutation("monitor_input_hash", C + "c/monitor.c", "if (after[b] != before[b]) mutated", "if (0 && after[b] != before[b]) mutated",
             ("tests/test_hacks.py::test_hack[h06_mutates_input]",)),
    # seccomp: clone only for threads (system()'s spawn dies here, before its execve would be refused; the
    # execve kill behind it is pinned by no test yet: removed alone, rd1 is still killed at the clone)
    Mutation("seccomp_clone_threads_only", C + "c/seccomp.h", "CLONE_THREAD, 0, 1), KO_RET(KO_ALLOW), KO_RET(KO_KILL));",
             "CLONE_THREAD, 0, 1), KO_RET(KO_ALLOW), KO_RET(KO_ALLOW));",
             ("tests/test_redteam.py::test_attack[rd1_libc_shell-local]",)),
    # issue 19: verify.scratch lets a task's named inputs change, and no others
    Mutation("scratch_only_named_inputs", C + "evaluator.py",
             'if m and m not in self.task.verify.scratch]', 'if m and m not in self.task.verify.scratch and False]',
             ("tests/test_task.py::test_scratch_inputs_may_be_overwritten_and_no_others",)),
    # issue 18 item 4: a busy machine. A disturbed round's samples never count; machine_busy is never "faster".
    Mutation("disturbed_round_set_aside", C + "evaluator.py", "kept = per_process if not why else set_aside",
             "kept = per_process", ("tests/test_busy.py::test_a_disturbed_round_is_run_again",)),
    Mutation("machine_busy_never_significant", "kernopt/evaluators/result.py", "return (not self.machine_busy and self.ci_low > 1.0",
             "return (self.ci_low > 1.0", ("tests/test_busy.py::test_machine_busy_is_never_significant",
                                            "tests/test_busy.py::test_too_many_disturbed_rounds_say_machine_busy")),
]


def tracked_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, check=True, capture_output=True).stdout.decode()
    return [f for f in out.split("\0") if f and (REPO / f).is_file()]  # tracked files deleted in the tree are left out


def copy_tree(dest: Path, files: list[str]) -> None:
    for f in files:
        (dest / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / f, dest / f, follow_symlinks=False)


def apply(root: Path, m: Mutation) -> None:
    path = root / m.file
    text = path.read_text()
    n = text.count(m.old)
    if n != 1:
        raise ValueError(f"{m.file}: the text to replace occurs {n} times, not once: {m.old!r}")
    path.write_text(text.replace(m.old, m.new))


def env_for(root: Path) -> dict[str, str]:
    env = os.environ.copy()
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(root / "tests")])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_one(m: Mutation, files: list[str]) -> tuple[str, float, str]:
    """(verdict, seconds, detail): caught, MISSED or NOT APPLIED."""
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"kernopt-mutant-{m.id}-") as tmp:
        root = Path(tmp)
        copy_tree(root, files)
        try:
            apply(root, m)
        except ValueError as e:
            return "NOT APPLIED", time.monotonic() - t0, str(e)
        env = env_for(root)
        where = subprocess.run([sys.executable, "-c", "import kernopt; print(kernopt.__file__)"], cwd=root, env=env,
                               capture_output=True, text=True)
        if not where.stdout.strip().startswith(str(root)):
            return "NOT APPLIED", time.monotonic() - t0, f"the copy's kernopt is not the one imported: {where.stdout}{where.stderr}"
        p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-c", str(root / "pyproject.toml"),
                            "--rootdir", str(root), *m.tests], cwd=root, env=env, capture_output=True, text=True)
        tail = "\n".join((p.stdout + p.stderr).strip().splitlines()[-3:])
        if p.returncode == 1:  # tests ran and failed
            return "caught", time.monotonic() - t0, tail
        if p.returncode == 0 and (" passed" in p.stdout and " skipped" not in p.stdout and " deselected" not in p.stdout):
            return "MISSED", time.monotonic() - t0, tail
        # no tests collected (a wrong node id), skipped tests, usage or internal errors: nothing was proved
        return "NOT APPLIED", time.monotonic() - t0, f"pytest exit {p.returncode}: {tail}"


def main(argv: list[str]) -> int:
    if "--list" in argv:
        for m in MUTATIONS:
            print(m.id)
        return 0
    chosen = [m for m in MUTATIONS if not argv or m.id in argv]
    unknown = set(argv) - {m.id for m in MUTATIONS}
    if unknown:
        print(f"mutants: unknown ids: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    files = tracked_files()
    t0, bad = time.monotonic(), 0
    for m in chosen:
        verdict, secs, detail = run_one(m, files)
        bad += verdict != "caught"
        print(f"{verdict:<12} {m.id:<32} {secs:6.1f}s  {' '.join(m.tests)}", flush=True)
        if verdict != "caught":
            print("    " + detail.replace("\n", "\n    "), flush=True)
    print(f"mutants: {len(chosen) - bad} of {len(chosen)} caught in {time.monotonic() - t0:.0f}s", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
