"""The `kernopt` command line: thin wrappers that parse options and call the layers below.

Heavy modules (numpy, scipy, tree-sitter) are imported inside commands so `kernopt --help` is instant.
User mistakes end in one line on stderr and a non-zero exit; tracebacks are for bugs.
"""

from __future__ import annotations

import functools
import json
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional, TypeVar

import typer
from rich.console import Console

app = typer.Typer(add_completion=False, no_args_is_help=True, help="kernopt: verified kernel optimization.")
task_app = typer.Typer(no_args_is_help=True, help="Inspect and validate task directories.")
runs_app = typer.Typer(no_args_is_help=True, help="Review runs: what was tried, by whom, with what result.")
sandbox_app = typer.Typer(no_args_is_help=True, help="Build and inspect the Docker sandbox.")
app.add_typer(task_app, name="task")
app.add_typer(runs_app, name="runs")
app.add_typer(sandbox_app, name="sandbox")
rtg_app = typer.Typer(no_args_is_help=True, help="The learned reward-to-go model that reranks proposals (--value learned).")
app.add_typer(rtg_app, name="rtg")
hw_app = typer.Typer(no_args_is_help=True, help="This machine's roofs: memory bandwidth and peak FLOP/s, for roofline figures.")
app.add_typer(hw_app, name="hw")
SANDBOX_HELP = ("Where code runs: docker (a fresh container per candidate evaluation), local (process isolation), "
                "auto (docker if an engine answers, else an error).")

NO_RACE_HELP = ("Do not race-check OpenMP candidates: their verdict is `off` and every summary says so. Without it, a "
                 "candidate whose race check cannot run (no clang sanitizer runtime, a construct it cannot run) is rejected.")

# Piped output is not cut at 80 columns: logs and `| less` get whole lines.
out = Console(width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 200)
F = TypeVar("F", bound=Callable[..., Any])


def user_errors(fn: F) -> F:
    """Turn the errors a user can cause into one line and an exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from rich.markup import escape

        from kernopt.errors import InfraError, TaskBuildError, UserError

        try:
            return fn(*args, **kwargs)
        except TaskBuildError as e:  # the task's own harness or baseline does not compile: the user's to fix
            err.print(f"[bold red]error:[/] {escape(e.one_line())}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
        except UserError as e:
            err.print(f"[bold red]error:[/] {escape(str(e))}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
        except InfraError as e:
            err.print(f"[bold red]infrastructure error:[/] {escape(str(e))}", highlight=False, soft_wrap=True)
            raise typer.Exit(3) from None

    return wrapper  # type: ignore[return-value]


def json_errors(fn: F) -> F:
    """With --json, a command that ends in a user or infrastructure error still prints one JSON object on
    stdout (status, error), then the error goes on to user_errors (one line on stderr, exit 2 or 3)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from kernopt.errors import InfraError, TaskBuildError, UserError

        try:
            return fn(*args, **kwargs)
        except (UserError, InfraError) as e:
            if kwargs.get("as_json"):
                user = isinstance(e, (UserError, TaskBuildError))
                line = e.one_line() if isinstance(e, TaskBuildError) else str(e)
                sys.stdout.write(json.dumps({"status": "user_error" if user else "infra_error", "error": line, "speedup": None,
                                             "significant": False}, indent=2) + "\n")
            raise

    return wrapper  # type: ignore[return-value]


def _version(value: bool) -> None:
    if value:
        from kernopt import __version__

        out.print(f"kernopt {__version__}")
        raise typer.Exit()


@app.callback()
def main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version.")) -> None:
    """kernopt: propose, verify and time faster kernels."""


# --------------------------------------------------------------------------- optimize
@app.command()
@user_errors
def optimize(
    task_dir: Optional[Path] = typer.Argument(None, help="Task directory (e.g. tasks/openmp/gemm); or `task` in --config."),
    budget: Optional[int] = typer.Option(None, "--budget", "-n", min=1, help="Candidates to evaluate (default: 20)."),
    search: Optional[str] = typer.Option(None, help="Search strategy: greedy | best-of-n | beam | tree | evolve (default: greedy)."),
    policy: Optional[str] = typer.Option(None, help="Who proposes candidates: tuner (offline, no model) | llm (default: tuner)."),
    model: Optional[str] = typer.Option(None, help="llm policy: provider/model as litellm names it (openai/gpt-4o-mini, ollama/qwen2.5-coder, ...)."),
    api_base: Optional[str] = typer.Option(None, help="llm policy: endpoint of a local or self-hosted server (vLLM, Ollama, OpenAI-compatible)."),
    value: Optional[str] = typer.Option(None, help="Reward-to-go model that reranks proposals: none | llm | learned (default: none)."),
    max_usd: Optional[float] = typer.Option(None, help="Stop (keeping the best) when model spend reaches this many USD."),
    max_tokens: Optional[int] = typer.Option(None, help="Stop (keeping the best) when model tokens reach this."),
    sandbox: Optional[str] = typer.Option(None, envvar="KERNOPT_SANDBOX", help=SANDBOX_HELP),
    runs_dir: Optional[Path] = typer.Option(None, help="Where run directories are created (default: runs)."),
    max_wall: Optional[float] = typer.Option(None, help="Stop starting evaluations after this many seconds."),
    seed: Optional[int] = typer.Option(None, help="Seed for proposal order (default: 0)."),
    config_file: Optional[Path] = typer.Option(None, "--config", help="A YAML or TOML file with any of these settings (see README)."),
    overrides: Optional[list[str]] = typer.Option(None, "--set", help="Override one setting: key.path=value (e.g. search.beam_width=3). Repeatable."),
    resume: Optional[str] = typer.Option(None, help="Continue a killed run (id or path). With --budget, --max-wall, --max-usd or "
                                          "--max-tokens: extend it (a finished one too); other options must match the run's."),
    no_race_check: bool = typer.Option(False, "--no-race-check", help=NO_RACE_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print a machine-readable summary on stdout."),
) -> None:
    """Search for a faster verified kernel for one task."""
    from kernopt.config import resolve_run_config
    from kernopt.errors import InfraError, UserError
    from kernopt.optimize import run_optimize
    from kernopt.runs import RunStore
    from kernopt.sandbox import Sandbox, get_sandbox
    from kernopt.task import load_task
    from kernopt.ui import ProgressHooks, print_summary

    sandbox_obj: Sandbox | None = None  # a resumed run makes the one its log names
    if resume:
        store = RunStore.open(resume, runs_dir or Path("runs"))
        store.lock()
        config, changed = _resume_config(store.config(), task_dir, config_file, overrides, sandbox, {
            "policy": policy, "search.type": search, "search.max_candidates": budget, "search.max_wall_s": max_wall,
            "search.seed": seed, "search.value": value, "model.name": model, "model.api_base": api_base, "model.max_usd": max_usd,
            "model.max_tokens_total": max_tokens, "eval.race_check": False if no_race_check else None})
        done = store.finished_summary()
        if done is not None and not changed:
            err.print(f"run {store.run_id} already finished; nothing to resume (extend it with --budget, --max-wall, "
                      "--max-usd or --max-tokens)")
            _finish(done, as_json)
            return
        check_run_model(config)  # a key exported since, or still missing: one line, nothing written
        if changed:  # only the limits: what was evaluated stays, and nothing is evaluated again
            store.update_config(config, changed)
            err.print(f"run {store.run_id} extended: " + ", ".join(f"{k} {a} -> {b}" for k, (a, b) in changed.items()),
                      highlight=False)
    else:
        flags = {"task": str(task_dir) if task_dir is not None else None, "policy": policy, "sandbox": sandbox,
                 "runs_dir": runs_dir, "search.type": search, "search.max_candidates": budget, "search.max_wall_s": max_wall,
                 "search.seed": seed, "search.value": value, "model.name": model, "model.api_base": api_base,
                 "model.max_usd": max_usd, "model.max_tokens_total": max_tokens, "eval.race_check": False if no_race_check else None}
        if task_dir is None and config_file is None:
            raise UserError("give a task directory (e.g. kernopt optimize tasks/openmp/gemm), a --config file, or --resume RUN")
        config = resolve_run_config(config_file, flags, overrides)
        task = load_task(Path(config.task))
        sandbox_obj = get_sandbox(config.sandbox, task.target)  # usable, checked before a run directory is created
        check_run_model(config)  # a model name litellm cannot place or a missing key: one line, before any run directory
        check_task_builds(task, sandbox_obj, config.eval)  # a broken baseline or harness is the user's to fix: no run yet
        # The run log records what was used (not "auto") and where the task is.
        config = config.model_copy(update={"sandbox": sandbox_obj.name, "task": str(task.root)})
        if config.search.value_path is not None:  # a resume may start elsewhere
            config.search.value_path = config.search.value_path.resolve()
        store = RunStore.create(config, task.name)
    err.print(f"run directory: [bold]{store.root}[/]")
    term_signal = TermSignal()
    hooks = ProgressHooks(err, config.search.max_candidates, checkpoint=term_signal.checkpoint)
    previous = signal.signal(signal.SIGTERM, term_signal.handler)  # `kill`, a batch system's time limit: like Ctrl-C
    sys.unraisablehook = term_signal.unraisable
    try:
        with hooks:
            summary = run_optimize(store, hooks, resumed=bool(resume), sandbox=sandbox_obj)
            term_signal.checkpoint()  # a TERM dropped during the last steps still ends the run as a TERM
    except KeyboardInterrupt as e:
        term_signal.pending = False
        term = isinstance(e, Terminated)
        err.print(f"[yellow]{'terminated' if term else 'interrupted'}[/]; continue with: kernopt optimize --resume {store.root}",
                  highlight=False, soft_wrap=True)
        raise typer.Exit(143 if term else 130) from None
    except InfraError as e:
        # Not the candidate's fault and not scored: the log is intact, so the run can continue later.
        err.print(f"[bold red]infrastructure error:[/] {e}; continue with: kernopt optimize --resume {store.root}",
                  highlight=False, soft_wrap=True)
        raise typer.Exit(3) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
        sys.unraisablehook = term_signal.previous_hook
        store.close()
    if as_json:
        _finish(summary, True)
    else:
        print_summary(out, summary, store.root)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the run is, so it unwinds (evaluator cleanup, the log's lock) as Ctrl-C does."""


class TermSignal:
    """SIGTERM for one run: the handler raises Terminated where the run is. Python drops an exception raised in
    some places without a trace ("Exception ignored in": a fork handler of `logging` while a sandbox process
    starts, a finalizer), so the run would go on and end 0 (seen in CI). `checkpoint()`, called by the progress
    hooks before each evaluation and at each message, raises it again then, once."""

    def __init__(self) -> None:
        self.pending = False
        self.previous_hook = sys.unraisablehook

    def unraisable(self, info: Any) -> None:
        """sys.unraisablehook while the run goes: a dropped Terminated is pending, not a traceback on the screen;
        anything else goes to the hook that was there before."""
        if not isinstance(info.exc_value, Terminated):
            self.previous_hook(info)

    def handler(self, signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second TERM while unwinding must not cut the cleanup short
        self.pending = True
        raise Terminated()

    def checkpoint(self) -> None:
        if self.pending:
            self.pending = False
            raise Terminated()


def _resume_config(stored: Any, task_dir: Optional[Path], config_file: Optional[Path], overrides: Optional[list[str]],
                   sandbox: Optional[str], flags: dict[str, Any]) -> tuple[Any, dict[str, tuple[Any, Any]]]:
    """The run's config with the options given to --resume: new limits extend it; any other option that differs
    from the run's is refused in one line (see config.resume_config)."""
    import os

    from kernopt.config import resume_config
    from kernopt.errors import UserError

    if task_dir is not None and task_dir.resolve() != Path(stored.task).resolve():
        raise UserError(f"--resume continues a run with its own task ({stored.task}); {task_dir} given (start a new run for it)")
    if sandbox is not None and sandbox != os.environ.get("KERNOPT_SANDBOX"):  # the variable is a default, not an option given
        flags = {**flags, "sandbox": sandbox}
    return resume_config(stored, config_file, flags, overrides)


def check_run_model(config: Any) -> None:
    """For a run that calls a model (the llm policy or value): the name and the key, checked offline."""
    if config.policy == "llm" or config.search.value == "llm":
        from kernopt.model import check_model

        check_model(config.model)


def check_task_builds(task: Any, sb: Any, eval_config: Any) -> None:
    """Build the task's harness and baseline once (a TaskBuildError naming the compiler's error when either does
    not compile: one line, exit 2), so a broken task ends before anything is created or measured."""
    import shutil
    import tempfile

    from kernopt.evaluators import get_evaluator

    workroot = Path(tempfile.mkdtemp(prefix="kernopt-check-"))
    ev = get_evaluator(task, sb, eval_config, workroot)
    build = getattr(ev, "baseline_binary", None)
    try:
        if build is not None:
            with ev.session():  # type: ignore[attr-defined]
                build()
    finally:
        ev.close()
        shutil.rmtree(workroot, ignore_errors=True)


def _finish(summary: dict[str, Any], as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    else:
        from kernopt.ui import print_summary

        print_summary(out, summary, Path(summary["run_dir"]))


# --------------------------------------------------------------------------- bench
@app.command()
@user_errors
def bench(
    paths: list[Path] = typer.Argument(..., help="Task directories or suites (searched recursively for task.toml)."),
    jobs: int = typer.Option(1, "--jobs", "-j", min=1, help="Tasks optimized at once."),
    executor: str = typer.Option("local", help="local (worker processes on this machine) | ray (a Ray cluster; pip install 'kernopt\\[ray]')."),
    address: Optional[str] = typer.Option(None, help="ray: the cluster's address, e.g. 127.0.0.1:6379."),
    filter_: Optional[str] = typer.Option(None, "--filter", help="Only tasks whose key (e.g. openmp/gemm) matches this regular expression."),
    name: Optional[str] = typer.Option(None, help="The bench's name, its directory under --benches-dir (default: from the suites and the policy)."),
    benches_dir: Path = typer.Option(Path("benches"), help="Where bench directories are created."),
    task_timeout: Optional[float] = typer.Option(None, min=1, help="Wall clock for one task's whole optimization, in seconds; then it is killed."),
    hardware: Optional[str] = typer.Option(None, help="ray: a custom resource naming the hardware every task needs (e.g. h100)."),
    budget: Optional[int] = typer.Option(None, "--budget", "-n", min=1, help="Candidates per task (default: 20)."),
    search: Optional[str] = typer.Option(None, help="Search strategy: greedy | best-of-n | beam | tree | evolve (default: greedy)."),
    policy: Optional[str] = typer.Option(None, help="Who proposes candidates: tuner (offline, no model) | llm (default: tuner)."),
    model: Optional[str] = typer.Option(None, help="llm policy: provider/model as litellm names it."),
    api_base: Optional[str] = typer.Option(None, help="llm policy: endpoint of a local or self-hosted server."),
    max_usd: Optional[float] = typer.Option(None, help="Per task: stop (keeping the best) when model spend reaches this many USD."),
    sandbox: Optional[str] = typer.Option(None, envvar="KERNOPT_SANDBOX", help=SANDBOX_HELP),
    config_file: Optional[Path] = typer.Option(None, "--config", help="A YAML or TOML file with run settings (see README)."),
    overrides: Optional[list[str]] = typer.Option(None, "--set", help="Override one setting: key.path=value. Repeatable."),
    no_race_check: bool = typer.Option(False, "--no-race-check", help=NO_RACE_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print summary.json on stdout."),
) -> None:
    """Optimize many tasks with one configuration; re-run the same command to resume."""
    import re

    from kernopt.bench.runner import default_name, discover, run_bench
    from kernopt.bench.store import BenchMeta, BenchStore
    from kernopt.bench.work import Executor
    from kernopt.config import resolve_run_config
    from kernopt.errors import UserError
    from kernopt.ui import BenchProgress, print_bench_summary

    if executor not in ("local", "ray"):
        raise UserError(f"unknown executor {executor!r}; choose local or ray")
    flags = {"task": "", "policy": policy, "sandbox": sandbox, "search.type": search, "search.max_candidates": budget,
             "model.name": model, "model.api_base": api_base, "model.max_usd": max_usd,
             "eval.race_check": False if no_race_check else None}
    config = resolve_run_config(config_file, flags, overrides)
    check_run_model(config)  # a bad model name or a missing key: one line now, not one failed task each
    refs = discover(paths, filter_)
    bench_name = name or default_name(paths, config.policy)
    if not re.fullmatch(r"[A-Za-z0-9_.+-]+", bench_name) or bench_name in (".", ".."):
        raise UserError(f"--name {bench_name!r}: use letters, digits and _ . + - only")
    if config.sandbox == "auto" and executor == "local":
        config = config.model_copy(update={"sandbox": _bench_sandbox(refs[0].task)})  # no engine: one line now, not N failures
    if config.search.value_path is not None:
        config.search.value_path = config.search.value_path.resolve()
    root = benches_dir / bench_name
    config = config.model_copy(update={"runs_dir": (root / "runs").resolve()})
    meta = BenchMeta(name=bench_name, executor=executor, jobs=jobs, filter=filter_, run_config=config, items=refs)
    ex: Executor
    if executor == "ray":
        try:
            from kernopt.bench.ray_executor import RayExecutor

            ex = RayExecutor(address=address, hardware=hardware, jobs=jobs)
        except ImportError as e:
            raise UserError(f"the ray executor needs Ray: pip install 'kernopt[ray]' ({e})") from None
    else:
        from kernopt.bench.local import LocalExecutor

        ex = LocalExecutor(jobs=jobs)
    try:
        store = BenchStore.open(root, meta)
    except BaseException:
        ex.close()
        raise
    try:
        err.print(f"bench directory: [bold]{root}[/] ({len(refs)} tasks, {executor} executor, {jobs} at once)", highlight=False)
        display = BenchProgress(err, len(refs), bench_name)
        try:
            with display:
                outcome = run_bench(store, ex, display.on_event, display.on_result, timeout_s=task_timeout, hardware=hardware,
                                    on_skip=display.on_skip)
        except KeyboardInterrupt:
            err.print(f"[yellow]interrupted[/]; run the same command again to resume ({root})")
            raise typer.Exit(130) from None
        finally:
            ex.close()
    finally:
        store.close()
    if as_json:
        sys.stdout.write(json.dumps(outcome.summary, indent=2) + "\n")
    else:
        print_bench_summary(out, outcome.summary, outcome.summary_json, outcome.summary_csv)
    if not outcome.all_finished:
        raise typer.Exit(1)


def _bench_sandbox(task_dir: str) -> str:
    """What `--sandbox auto` means for a bench here: docker when an engine answers (else its one-line error)."""
    from kernopt.sandbox import get_sandbox
    from kernopt.task import load_task

    try:
        target: str = load_task(task_dir).target
    except Exception:
        target = ""
    return get_sandbox("auto", target).name


# --------------------------------------------------------------------------- eval
@app.command("eval")
@user_errors
@json_errors
def eval_cmd(
    task_dir: Path = typer.Argument(..., help="Task directory."),
    candidate: Path = typer.Option(..., "--candidate", "-c", help="Your kernel source file."),
    threads: Optional[int] = typer.Option(None, min=1, help="OpenMP threads for timing (default: the task's)."),
    ranks: Optional[int] = typer.Option(None, min=1, help="MPI ranks for timing (default: the task's)."),
    cflag: list[str] = typer.Option([], "--cflag", help="Extra compiler flag for the kernel (repeatable)."),
    sandbox: str = typer.Option("auto", envvar="KERNOPT_SANDBOX", help=SANDBOX_HELP),
    no_race_check: bool = typer.Option(False, "--no-race-check", help=NO_RACE_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print a machine-readable verdict on stdout."),
) -> None:
    """Verify and time your own kernel under the same protocol as the optimizer."""
    import tempfile

    from kernopt.candidate import Candidate
    from kernopt.config import EvalConfig
    from kernopt.errors import UserError
    from kernopt.evaluators import get_evaluator
    from kernopt.hw.probe import profile_for_task
    from kernopt.sandbox import get_sandbox
    from kernopt.task import load_task
    from kernopt.ui import print_eval

    task = load_task(task_dir)
    if not candidate.is_file():
        raise UserError(f"{candidate}: no such file")
    try:
        source = candidate.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{candidate}: cannot read: {e}") from None
    cand = Candidate(files={task.kernel: source}, threads=threads, ranks=ranks, cflags=cflag, author="user",
                     idea=f"user kernel {candidate.name}")
    sb = get_sandbox(sandbox, task.target)
    from kernopt.doctor import preflight

    eval_config = EvalConfig(race_check=not no_race_check)
    preflight(sb, task, eval_config)  # every gate this task needs is live (a pass is cached)
    profile = profile_for_task(task, sb, lambda msg: err.print(f"[cyan]•[/] {msg}", highlight=False))  # measured once per host
    ev = get_evaluator(task, sb, eval_config, Path(tempfile.mkdtemp(prefix="kernopt-eval-")),
                       profile=profile)
    try:
        with err.status(f"evaluating {candidate} on {task.name} (build, verify, race check, timing)...") as spinner:
            from rich.markup import escape

            ev.on_phase = lambda text: spinner.update(f"evaluating {escape(str(candidate))} on {task.name}: {escape(text)}")
            result = ev.evaluate(cand)  # a task that does not build: TaskBuildError, one line and exit 2 (user_errors)
    finally:
        ev.close()
    if as_json:
        sys.stdout.write(json.dumps({**result.summary(), "task": task.name, "race_check": result.verification.race_check,
                                     "verification": result.verification.model_dump(),
                                     "timing": result.timing.model_dump(exclude={"baseline_s", "candidate_s"}) if result.timing else None,
                                     "phase_s": result.phase_s}, indent=2) + "\n")
    else:
        print_eval(out, task.name, result)
    # A script can rely on it (`kernopt eval ... && deploy`): 0 only for a verified kernel.
    if result.status == "infra_error":
        raise typer.Exit(3)
    if result.status != "ok":
        raise typer.Exit(1)


# --------------------------------------------------------------------------- task check
@task_app.command("check")
@user_errors
def task_check(
    task_dir: Path = typer.Argument(..., help="Task directory to validate."),
    sandbox: str = typer.Option("auto", envvar="KERNOPT_SANDBOX", help=SANDBOX_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the checks as JSON."),
) -> None:
    """Validate a task: it loads, the baseline builds and runs, outputs depend on inputs, timing is measurable."""
    from kernopt.sandbox import get_sandbox
    from kernopt.task import load_task
    from kernopt.task_check import check_task

    task = load_task(task_dir)
    checks = check_task(task, get_sandbox(sandbox, task.target), progress=lambda msg: err.print(f"  … {msg}", highlight=False))
    failed = [c for c in checks if not c.ok]
    if as_json:
        sys.stdout.write(json.dumps({"task": task.name, "ok": not failed, "checks": [c.__dict__ for c in checks]}, indent=2) + "\n")
    else:
        for c in checks:
            mark = "[green]ok[/]  " if c.ok else ("[yellow]warn[/]" if c.warning else "[red]FAIL[/]")
            out.print(f"{mark} {c.name}: {c.detail}", highlight=False)
    if any(not c.warning for c in failed):
        first = next(c for c in failed if not c.warning)
        err.print(f"[bold red]error:[/] task {task.name} is not valid: {first.name}: {first.detail}", highlight=False)
        raise typer.Exit(1)


@task_app.command("import-kernelbench")
@user_errors
def task_import_kernelbench(
    path: Path = typer.Argument(..., help="A KernelBench problem file (Model, get_inputs, get_init_inputs), or a directory of them."),
    out_dir: Path = typer.Option(Path("tasks/kernelbench"), "--out", help="Where the task directories are written (one per problem)."),
    target: str = typer.Option("triton", help="What candidates write: triton, or cuda (through torch's inline extension loader)."),
    force: bool = typer.Option(False, "--force", help="Overwrite task directories of the same names."),
) -> None:
    """Turn KernelBench problem files into task directories (reference.py, solution.py, task.toml)."""
    from kernopt.kernelbench import import_problems

    written, skipped = import_problems(path, out_dir, target, force)
    for d in written:
        out.print(f"[green]imported[/] {d}", highlight=False)
    for why in skipped:
        err.print(f"[yellow]skipped[/] {why}", highlight=False)
    if not written:
        err.print(f"[bold red]error:[/] {path}: no KernelBench problem files found", highlight=False)
        raise typer.Exit(2)
    err.print(f"{len(written)} task(s) written under {out_dir}; next: kernopt task check {written[0]}", highlight=False)


@task_app.command("new")
@user_errors
def task_new(
    name: str = typer.Argument(..., help="The task's name."),
    source: Path = typer.Option(..., "--from", help="The C file that defines the kernel function (it becomes the baseline)."),
    function: str = typer.Option(..., "--function", help="The kernel function."),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="The task directory to write (default: ./NAME)."),
    size: list[str] = typer.Option([], "--size", help="BUFFER=EXPR: the buffer's element count in terms of n (e.g. a='n*n')."),
    param: list[str] = typer.Option([], "--param", help="SCALAR=EXPR (an integer's value in terms of n, a float's fixed value), or SCALAR (= n)."),
    role: list[str] = typer.Option([], "--role", help="BUFFER=in|out|inout|scratch (default: const pointers in, others out; "
                                    "scratch: an input it may overwrite)."),
    fill: list[str] = typer.Option([], "--fill", help="BUFFER=LO:HI: inputs drawn uniformly from [LO, HI) (e.g. idx=0:n)."),
    target: str = typer.Option("openmp", help="openmp, c, mpi or mpi+openmp."),
    timing: Optional[int] = typer.Option(None, "--timing", help="The timing size (default: calibrated by running the baseline)."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Take the inferred defaults for everything the options leave open (no prompts)."),
    force: bool = typer.Option(False, "--force", help="Write into a non-empty directory."),
    no_check: bool = typer.Option(False, "--no-check", help="Do not run `task check` on the result."),
    sandbox: str = typer.Option("auto", envvar="KERNOPT_SANDBOX", help=SANDBOX_HELP),
) -> None:
    """Write a task directory for a kernel of your own (docs/tasks.md, "task new"), then check it."""
    from rich.markup import escape

    from kernopt.task_new import run_new

    ok = run_new(name, source, function, out_dir or Path(name), sizes=size, params=param, roles=role, fills=fill, target=target,
                 timing=timing, ask=None if yes else (lambda q, d: str(typer.prompt(q, default=d))), force=force,
                 check=not no_check, sandbox_name=sandbox, say=lambda m: err.print(f"  … {m}", highlight=False),
                 show=lambda m: out.print(escape(m), highlight=False))
    if not ok:
        raise typer.Exit(1)


# --------------------------------------------------------------------------- sandbox
@sandbox_app.command("build")
@user_errors
def sandbox_build(
    offline: bool = typer.Option(False, "--offline", help="Bootstrap the Debian base from the package archive (mmdebstrap), no image registry."),
    suite: Optional[str] = typer.Option(None, help="Debian suite (default: this machine's, else bookworm)."),
    mirror: str = typer.Option("http://deb.debian.org/debian", help="Debian mirror for --offline."),
    image: str = typer.Option("cpu", help="cpu (every CPU target) or cuda (GPU targets; needs a registry)."),
) -> None:
    """Build a sandbox image (cpu: gcc, clang, OpenMPI, python3; cuda: nvcc), tagged by content; reused when present."""
    import time

    from kernopt.sandbox.docker import connect
    from kernopt.sandbox.image import build_image

    t0 = time.monotonic()
    tag, built = build_image(connect(), offline=offline, suite=suite, mirror=mirror, say=lambda m: err.print(f"  … {m}", highlight=False),
                             kind=image)
    out.print(f"{tag} {'built' if built else 'already present'} ({time.monotonic() - t0:.1f}s)", highlight=False)


@sandbox_app.command("check")
@user_errors
def sandbox_check(as_json: bool = typer.Option(False, "--json", help="Print the report as JSON.")) -> None:
    """Report the engine, the image, and the limits in effect measured from inside a container."""
    from kernopt.sandbox.check import check
    from kernopt.sandbox.docker import DockerSandbox

    report = check(DockerSandbox())
    if as_json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    else:
        e, m = report["engine"], report["measured"]
        out.print(f"engine   {e['host']}: Docker {e['version']} on {e['os']} (kernel {e['kernel']}, {e['cpus']} CPUs, cgroup {e['cgroup']})",
                  highlight=False)
        out.print(f"image    {report['image']['tag']} ({report['image']['id']}, {report['image']['size_mb']} MiB)", highlight=False)
        for key in ("uid", "root_fs", "network", "interfaces", "no_new_privs", "cap_eff", "pids_max", "memory_max", "cpu_max",
                    "nofile", "fsize_bytes", "cpu_s", "workdir_bytes", "workdir_inodes"):
            out.print(f"  {key:<15} {m[key]}", highlight=False)
        out.print(f"gpu      {report['gpu']}", highlight=False)
    if report["problems"]:
        err.print(f"[bold red]error:[/] sandbox containment gaps: {'; '.join(report['problems'])}", highlight=False)
        raise typer.Exit(1)


# --------------------------------------------------------------------------- runs
@runs_app.command("list")
@user_errors
def runs_list(runs_dir: Path = typer.Option(Path("runs"), help="Runs directory.")) -> None:
    """List runs, newest last."""
    from kernopt.runs import list_runs
    from kernopt.ui import print_runs

    runs = list_runs(runs_dir)
    if not runs:
        err.print(f"no runs in {runs_dir}")
        return
    print_runs(out, runs)


@runs_app.command("show")
@user_errors
def runs_show(run: str = typer.Argument(..., help="Run id or path."),
              runs_dir: Path = typer.Option(Path("runs"), help="Runs directory."),
              as_json: bool = typer.Option(False, "--json", help="Print candidates as JSON.")) -> None:
    """Show what a run tried: candidates with parent, author, idea, status and speedup."""
    from kernopt.runs import RunStore
    from kernopt.ui import print_run

    store = RunStore.open(run, runs_dir)
    if as_json:
        rows = [{"n": i, "id": c.id, "parent": c.parent, "author": c.author, "idea": c.idea, **r.summary()}
                for i, (c, r) in enumerate(store.evaluated().values(), 1)]
        sys.stdout.write(json.dumps({"run_id": store.run_id, "summary": store.summary(), "candidates": rows}, indent=2) + "\n")
    else:
        print_run(out, store)


CANDIDATE_REF_HELP = ("A candidate: its # in `kernopt runs show` (a number of up to 4 digits; 0 is the baseline), "
                      "`baseline`, `best`, or its id or a unique prefix of it (all digits: 5 or more, else it reads as a #).")


def candidate_ref(store: Any, ref: str) -> str:
    """A `#` row number of `runs show` (up to 4 digits; 0 = the baseline) as the id it names; other refs unchanged."""
    from kernopt.errors import UserError

    ref = ref.strip()
    if not (ref.isdigit() and len(ref) <= 4):
        return ref
    ids = list(store.evaluated())
    n = int(ref)
    if n == 0:
        return "baseline"
    if n > len(ids):
        raise UserError(f"no candidate #{n} in run {store.run_id}: `kernopt runs show` numbers its {len(ids)} candidates "
                        f"1..{len(ids)} (0 or `baseline` is the baseline)")
    return str(ids[n - 1])


@runs_app.command("diff")
@user_errors
def runs_diff(run: str = typer.Argument(..., help="Run id or path."),
              a: str = typer.Argument(..., help=CANDIDATE_REF_HELP),
              b: str = typer.Argument(..., help=CANDIDATE_REF_HELP),
              runs_dir: Path = typer.Option(Path("runs"), help="Runs directory.")) -> None:
    """Unified diff of two candidates' files and knobs (highlighted in a terminal, plain when piped)."""
    from rich.markup import escape
    from rich.syntax import Syntax

    from kernopt.report.data import candidate_diff, load_run, resolve
    from kernopt.runs import RunStore

    store = RunStore.open(run, runs_dir)
    data = load_run(store)
    a, b = candidate_ref(store, a), candidate_ref(store, b)
    na, nb = resolve(data, a), resolve(data, b)
    if "best" in (a, b) and data.best_id is None:
        err.print("note: no candidate was significantly faster, so `best` is the baseline", highlight=False)
    if data.baseline_note and (na.is_baseline or nb.is_baseline):
        err.print(f"note: {data.baseline_note}", highlight=False)
    la, lb = ("baseline" if n.is_baseline else n.id for n in (na, nb))
    text = candidate_diff(na.candidate, nb.candidate, la, lb)
    if not text:
        out.print(f"{escape(la)} and {escape(lb)} are identical (files and knobs)", highlight=False)
    elif out.is_terminal:
        out.print(Syntax(text, "diff", theme="ansi_dark", background_color="default", word_wrap=False))
    else:
        sys.stdout.write(text + "\n")


@runs_app.command("report")
@user_errors
def runs_report(target: str = typer.Argument(..., help="A run (id or path) or a bench directory."),
                output: Optional[Path] = typer.Option(None, "--output", "-o", help="Where to write the HTML (default: <dir>/report.html)."),
                runs_dir: Path = typer.Option(Path("runs"), help="Runs directory (for run ids)."),
                benches_dir: Path = typer.Option(Path("benches"), help="Benches directory (for bench names).")) -> None:
    """Write one self-contained HTML report (plots, lineage tree, every candidate's evidence, source and diff)."""
    from kernopt.report import write_report

    path = write_report(target, output, runs_dir=runs_dir, benches_dir=benches_dir)
    sys.stdout.write(f"{path}\n")


# --------------------------------------------------------------------------- hw
@hw_app.command("probe")
@user_errors
def hw_probe(
    sandbox: str = typer.Option("auto", envvar="KERNOPT_SANDBOX", help=SANDBOX_HELP),
    refresh: bool = typer.Option(False, "--refresh", help="Measure again even when a profile is cached."),
    replace: bool = typer.Option(False, "--replace", help="With --refresh: cache the new measurement even when it looks "
                                 "busy and the cached one does not (by default that one is kept)."),
    as_json: bool = typer.Option(False, "--json", help="Print the profile as JSON."),
) -> None:
    """Measure memory bandwidth (STREAM triad) and peak FP64 rate inside the sandbox; cached per host."""
    from kernopt.hw.probe import cache_path, cached_profile, probe
    from kernopt.sandbox import get_sandbox
    from kernopt.ui import print_profile

    sb = get_sandbox(sandbox, "openmp")
    before = cached_profile(sb)
    prof = None if refresh else before
    cached = prof is not None
    if prof is None:
        kept: list[str] = []
        with err.status(f"measuring memory bandwidth and peak FLOP/s in the {sb.name} sandbox (a few seconds)..."):
            prof = probe(sb, refresh=True, replace=replace,
                         say=lambda m: kept.append(m) if m.startswith("kept the cached") else None)
        cached = prof == before
        for line in kept:
            err.print(f"[yellow]note:[/] {line}", highlight=False)
    if as_json:
        sys.stdout.write(json.dumps({**prof.model_dump(mode="json"), "cached": cached, "path": str(cache_path(prof.fingerprint)),
                                     "balance_flop_per_byte": prof.balance}, indent=2) + "\n")
    else:
        print_profile(out, prof, cache_path(prof.fingerprint), cached)


@app.command()
@user_errors
def doctor(
    sandbox: str = typer.Option("auto", envvar="KERNOPT_SANDBOX", help=SANDBOX_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the checks as JSON."),
) -> None:
    """Prove each gate is live in the sandbox (build and monitor, race check, MPI); one line each, with the fix."""
    from dataclasses import asdict

    from kernopt import doctor as doc
    from kernopt.sandbox import get_sandbox

    sb = get_sandbox(sandbox, "openmp")
    with err.status(f"checking the gates in the {sb.name} sandbox..."):
        checks = doc.run(sb, fresh=True)
    if as_json:
        sys.stdout.write(json.dumps({"sandbox": sb.name, "checks": [asdict(c) for c in checks]}, indent=2) + "\n")
    else:
        for c in checks:
            mark = "[green]ok  [/]" if c.ok else "[bold red]FAIL[/]"
            out.print(f"{mark} {c.name:<6} {c.detail}" + ("" if c.ok else f"\n       fix: {c.fix}"), highlight=False)
    if not all(c.ok for c in checks):
        raise typer.Exit(1)


# --------------------------------------------------------------------------- rtg
@rtg_app.command("train")
@user_errors
def rtg_train(
    runs: list[Path] = typer.Argument(..., help="Run directories to learn from (their logged candidates and results)."),
    model_out: Path = typer.Option(Path("rtg.json"), "--out", "-o", help="Where the fitted model is written."),
    seed: int = typer.Option(0, help="Seed for the held-out split."),
    split: str = typer.Option("run", help="What is held out: run (a quarter of the runs) or task (each task in turn, "
                                         "ranked by a model fit on the other tasks' runs)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Fit the reward-to-go model on logged runs; print its held-out rank correlation."""
    import math

    from kernopt.agent.value import format_report, train

    report = train(runs, model_out, seed=seed, split=split)
    if as_json:
        def clean(v: object) -> object:
            if isinstance(v, dict):
                return {k: clean(x) for k, x in v.items()}
            return None if isinstance(v, float) and math.isnan(v) else v
        print(json.dumps(clean(report.model_dump(mode="json")), indent=1))
    else:
        out.print(format_report(report), highlight=False)
        err.print(f"use it with: kernopt optimize TASK --value learned --set search.value_path={model_out}", highlight=False)


if __name__ == "__main__":
    app()
