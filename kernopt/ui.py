"""Terminal display for the CLI: live progress hooks and result tables (rich)."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Column, Table
from rich.text import Text

from kernopt.agent.search import Hooks
from kernopt.candidate import Candidate
from kernopt.estimate import bench_eta_s, eta_s, fmt_duration
from kernopt.evaluators.result import EvalResult, Roofline, fmt_percent, fmt_seconds
from kernopt.model import Spend
from kernopt.runs import RunStore, phase_summary
from kernopt.verdicts import explain, legend, shown

if TYPE_CHECKING:
    from kernopt.hw.probe import HardwareProfile

STATUS_STYLE = {"ok": "green", "unverified": "cyan", "wrong_answer": "red", "rejected": "magenta", "compile_error": "yellow",
                "runtime_error": "red", "timeout": "yellow", "infra_error": "bold red"}


def fmt_speedup(r: EvalResult) -> str:
    """'34.1 ms, 24.4x [23.1, 25.0]': the candidate's own median time per call beside its speedup over the baseline
    (which divides by that evaluation's baseline timing), and, when it was timed against the best, that ratio:
    '; vs best: 0.99x [0.97, 1.01]' (issue 28)."""
    if r.speedup is None or r.timing is None:
        return "-"
    out = f"{fmt_seconds(r.timing.candidate_median_s)}, {r.speedup:.2f}x [{r.timing.ci_low:.2f}, {r.timing.ci_high:.2f}]"
    return out + (f"; {r.vs_best.describe()}" if r.vs_best is not None else "")


def fmt_status(r: EvalResult) -> str:
    """The status as it should read: a verified candidate that is not significantly faster says so."""
    if r.status != "ok" or r.timing is None or r.faster:
        return r.status
    return "ok (slower)" if r.timing.ci_high < 1.0 else "ok (not faster)"


def status_style(r: EvalResult) -> str:
    return "yellow" if fmt_status(r) != r.status else STATUS_STYLE.get(r.status, "white")


def fmt_spend(spend: Spend) -> str:
    tokens = f"{spend.tokens / 1000:.1f}k" if spend.tokens >= 1000 else str(spend.tokens)
    return f"${spend.usd:.4f} · {tokens} tok · {spend.calls} calls"


def fmt_race(verdict: str) -> str:
    """The race verdict for a progress line: ' · race clean', '' where no check applies."""
    return "" if verdict in ("not_run", "skipped") else f" · race {verdict}"


def race_lines(s: dict[str, Any]) -> list[str]:
    """The end-of-run lines about the race check: its verdicts, and that it was off when it was."""
    lines = []
    if s.get("race_check") == "off":
        lines.append("[bold yellow]race check: OFF[/] (--no-race-check): OpenMP candidates were not checked for data races")
    counts = ", ".join(f"{k} {v}" for k, v in sorted((s.get("race_checks") or {}).items()))
    if counts and s.get("race_check") != "off":
        lines.append(f"race check: {counts}")
    return lines


class EtaColumn(ProgressColumn):
    """ETA from the mean duration of the candidates evaluated so far (kernopt/estimate.py), refreshed with
    the clock: rich's own column estimates from the last 30 s and shows nothing when a candidate takes minutes."""

    def __init__(self, hooks: ProgressHooks) -> None:
        super().__init__()
        self.hooks = hooks

    def render(self, task: Task) -> Text:
        left = self.hooks.eta()
        if self.hooks.done >= self.hooks.budget:  # the winner's re-measurement: not estimated
            return Text("ETA -", style="progress.remaining")
        return Text("ETA " + ("-:--:--" if left is None else f"~{fmt_duration(left)}"), style="progress.remaining")


class RunElapsedColumn(ProgressColumn):
    """Time since the run started, still counting after the last candidate (rich's column stops when the bar is
    full, while the winner is re-measured)."""

    def __init__(self, hooks: ProgressHooks) -> None:
        super().__init__()
        self.hooks = hooks

    def render(self, task: Task) -> Text:
        s = int(time.monotonic() - self.hooks._t0)
        return Text(f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}", style="progress.elapsed")


class ProgressHooks(Hooks):
    """Live progress: candidates tried, statuses, best verified speedup so far, elapsed and ETA; the phase
    of the evaluation in progress (building, verifying, race check, waiting for the timing lock, timing)."""

    def __init__(self, console: Console, budget: int, checkpoint: Callable[[], None] | None = None) -> None:
        self.console = console
        self.checkpoint = checkpoint  # called before each evaluation and at each message (the CLI's TERM handling)
        self.counts: collections.Counter[str] = collections.Counter()
        self.best = "none yet"
        self.budget = budget
        # The fixed-width columns first: a long phase line ("waiting for the timing lock held by ...") is cut at
        # its end on a narrow terminal, never the counts, elapsed time and ETA.
        self.progress = Progress(SpinnerColumn(), BarColumn(bar_width=20), MofNCompleteColumn(), RunElapsedColumn(self), EtaColumn(self),
                                 TextColumn("{task.description}", table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis")),
                                 console=console, transient=False, expand=True)
        self.task_id = self.progress.add_task("starting", total=budget)
        self._t0 = time.monotonic()
        self.spend: Spend | None = None  # the models' spend, shown next to the best speedup (llm runs)
        self.durations: list[float] = []  # seconds of each candidate evaluated in this process (not from the log)
        self.prior_s: float | None = None  # the up-front estimate per candidate, until one has finished
        self.done = 0
        self._current: tuple[str, float] | None = None  # (candidate id, when its evaluation started)
        self.explained: set[str] = set()  # flags whose meaning a progress line already gave (once per run)

    def eta(self, now: float | None = None) -> float | None:
        """Seconds left in the run (estimate.eta_s), None when nothing is known yet."""
        now = time.monotonic() if now is None else now
        current = now - self._current[1] if self._current is not None else 0.0
        return eta_s(self.durations, self.budget - self.done, current, self.prior_s)

    def on_estimate(self, per_candidate_s: float, text: str) -> None:
        self.prior_s = per_candidate_s
        self.console.print(f"[cyan]•[/] {escape(text)}", highlight=False, soft_wrap=True)

    def on_phase(self, text: str) -> None:
        # called from the evaluator, or its lock-wait thread: rich locks its own updates. Without a candidate in
        # progress it is the winner's re-measurement.
        who = f"{self._current[0]}: " if self._current is not None else ""
        self.progress.update(self.task_id, description=self._describe(f" | {who}{escape(text)}"))

    def __enter__(self) -> ProgressHooks:
        self.progress.start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.progress.stop()

    def _describe(self, extra: str = "") -> str:
        counts = " ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
        spend = f" | {fmt_spend(self.spend)}" if self.spend is not None else ""
        return f"best [bold green]{self.best}[/]{spend} | {counts or 'no results yet'}{extra}"

    def on_eval_start(self, candidate: Candidate, index: int, budget: int) -> None:
        if self.checkpoint is not None:
            self.checkpoint()
        self._current = (candidate.id, time.monotonic())
        self.progress.update(self.task_id, description=self._describe(f" | evaluating {candidate.id}"))

    def on_eval_done(self, candidate: Candidate, result: EvalResult, cached: bool,
                     best: tuple[Candidate, EvalResult] | None) -> None:
        if self._current is not None and not cached:
            self.durations.append(time.monotonic() - self._current[1])
        self._current = None
        self.done += 1
        self.counts[result.status] += 1
        if best is not None:
            self.best = f"{best[1].speedup:.2f}x"
        style = status_style(result)
        tag = " (from log)" if cached else f" {sum(result.phase_s.values()):.1f}s"
        tag += fmt_race(result.verification.race_check) + (f" · flags {', '.join(result.flags)}" if result.flags else "")
        mark = " [bold green]★ new best[/]" if best is not None and best[0].id == candidate.id else ""
        detail = fmt_speedup(result) if result.status == "ok" and result.timing else result.reason
        # ideas and reasons come from models and compilers: "a[i]" is text, not markup
        self.console.print(f"  {candidate.id} [{style}]{fmt_status(result):<15}[/] {escape(detail[:150])}{mark}"
                           f"[dim]{tag} — {escape(candidate.idea[:80])}[/]", highlight=False, soft_wrap=True)
        for flag in result.flags:  # each flag's meaning under the first line that shows it
            if flag not in self.explained and explain(flag):
                self.explained.add(flag)
                self.console.print(f"[dim]      {escape(flag)}: {escape(explain(flag))}[/]", highlight=False, soft_wrap=True)
        self.progress.update(self.task_id, advance=1, description=self._describe())

    def on_message(self, text: str) -> None:
        if self.checkpoint is not None:
            self.checkpoint()
        self.console.print(f"[cyan]•[/] {escape(text)}", highlight=False)


def print_summary(console: Console, s: dict[str, Any], run_dir: Path) -> None:
    console.print()
    if s.get("best_candidate"):
        ci = s.get("best_ci") or [float("nan"), float("nan")]
        sig = "significant" if s.get("best_significant") else "NOT significant on re-measurement"
        # a re-measured best that is not significantly faster must not read as a win
        slow = "" if s.get("best_significant") else (" (slower)" if ci[1] < 1.0 else " (not faster)")
        speed = "bold green" if s.get("best_significant") else "bold yellow"
        if "machine_busy" in (s.get("best_flags") or []):
            sig, slow, speed = "machine too busy to time it: re-run on a quieter machine", "", "bold yellow"
        console.print(f"[bold]best:[/] {s['best_candidate']} — [{speed}]{s['best_speedup']:.2f}x{slow}[/] "
                      f"(95% CI {ci[0]:.2f}–{ci[1]:.2f}, {sig}; re-measured in a fresh sandbox: this is the claim)", highlight=False)
        if s.get("search_speedup") is not None:  # the search's own figure, beside the claim and not in place of it
            sci = s.get("search_ci") or [float("nan"), float("nan")]
            console.print(f"      in the search: {s['search_speedup']:.2f}x (95% CI {sci[0]:.2f}–{sci[1]:.2f}, "
                          f"{'significant' if s.get('search_significant') else 'not significant'})", highlight=False)
        if s.get("best_reruns"):
            console.print(f"      re-measurement: {len(s['best_reruns'])} disturbed round(s): "
                          + escape("; ".join(s["best_reruns"])[:200]), highlight=False)
        if s.get("best_speedup_vs_eager"):
            vs_compile = f", {s['best_speedup_vs_compile']:.2f}x vs torch.compile" if s.get("best_speedup_vs_compile") else ""
            console.print(f"      {s['best_speedup_vs_eager']:.2f}x vs eager PyTorch{vs_compile} on {s.get('device', 'the GPU')}",
                          highlight=False)
        for step in s.get("best_lineage") or [s.get("best_idea", "")]:
            console.print(f"      + {escape(str(step))}", highlight=False)
        console.print(f"      kernel: {run_dir / 'best'}", highlight=False)
        if s.get("best_build"):
            console.print(f"      built with: {escape(s['best_build'])}  (best/BUILD: the link and run, too)", highlight=False)
        for r in s.get("refuted") or []:  # better candidates of the search whose re-measurement did not hold up
            console.print(f"      not confirmed: {r['candidate']}, {r['search_speedup'] or 0:.2f}x in the search; "
                          f"{escape(str(r['reason']).removeprefix('re-measured; '))}", highlight=False)
    elif s.get("refuted"):
        console.print("[bold]best:[/] the baseline: no candidate's speedup held up when re-measured in a fresh sandbox")
        for r in s["refuted"]:
            console.print(f"      {r['candidate']}: {r['search_speedup'] or 0:.2f}x in the search; "
                          f"{escape(str(r['reason']).removeprefix('re-measured; '))}", highlight=False)
    else:
        console.print("[bold]best:[/] no candidate was verified and significantly faster than the baseline")
    if s.get("best_roofline"):
        roof = Roofline.model_validate(s["best_roofline"])
        base = s.get("baseline_roofline_fraction")
        console.print(f"      roofline: {roof.describe()}" + (f"; the baseline: {fmt_percent(base)}" if base else ""), highlight=False)
    if s.get("note"):
        console.print(f"[yellow]note:[/] {escape(str(s['note']))}", highlight=False)
    counts = ", ".join(f"{k} {v}" for k, v in sorted(s.get("statuses", {}).items()))
    console.print(f"candidates: {s['candidates']} ({counts}); elapsed {s['elapsed_s']:.0f}s", highlight=False)
    if s.get("phases"):
        console.print(phase_line(s), highlight=False, soft_wrap=True)
    for line in race_lines(s):
        console.print(line, highlight=False)
    if s.get("spend"):
        console.print(f"model spend: {fmt_spend(Spend.model_validate(s['spend']))}", highlight=False)
    if s.get("stopped_by"):
        console.print(f"stopped by: {escape(str(s['stopped_by']))}", highlight=False)
    for line in summary_legend(s):
        console.print(line, highlight=False, soft_wrap=True)
    console.print(f"run directory: {run_dir}", highlight=False)


def phase_line(s: dict[str, Any]) -> str:
    """'time per phase (total, median per candidate): build 4.1 s (0.7 s) · time 61 s (11 s) · ...; re-measuring the best 30 s'."""
    parts = [f"{name} {p['total_s']:.1f} s ({p['median_s']:.1f} s)" for name, p in (s.get("phases") or {}).items()]
    confirm = f"; re-measuring the best {s['confirm_s']:.0f} s" if s.get("confirm_s") else ""
    return "time per phase (total, median per candidate): " + " · ".join(parts) + confirm


def summary_legend(s: dict[str, Any]) -> list[str]:
    """The end-of-run summary's flags (counted) and a legend: one line for each status, race verdict,
    significance verdict and flag the summary shows, once (kernopt.verdicts)."""
    flags = dict(s.get("flags") or {})
    for f in s.get("best_flags") or []:
        flags.setdefault(f, 0)
    lines = [f"flags: {escape(', '.join(f'{k} {v}' if v else k for k, v in sorted(flags.items())))}"] if flags else []
    words = list(s.get("statuses") or {})
    if s.get("race_check") != "off":
        words += list(s.get("race_checks") or {})
    if s.get("best_candidate"):
        words.append("significant" if s.get("best_significant") else "not significant")
    return lines + legend_lines([*words, *sorted(flags)])


def legend_lines(words: list[str], indent: str = "") -> list[str]:
    """'what these mean:' and one dim line per word that has a meaning (kernopt.verdicts); nothing when none has."""
    meanings = legend(words)
    return [f"{indent}[dim]what these mean:[/]", *(f"{indent}[dim]  {escape(m)}[/]" for m in meanings)] if meanings else []


def print_eval(console: Console, task: str, r: EvalResult) -> None:
    style = status_style(r)
    console.print(f"[bold]{escape(task)}[/]: [{style}]{fmt_status(r)}[/] — {escape(r.reason)}", highlight=False, soft_wrap=True)
    v = r.verification
    if v.sizes:
        counts = f"threads {v.threads}" if v.threads else (f"ranks {v.ranks}" if v.ranks else "serial")
        console.print(f"  verified: sizes {v.sizes} × {v.seeds} seeds, {counts}, race check: {v.race_check}", highlight=False)
    if v.race_check == "off":
        console.print("  [bold yellow]race check: OFF[/] (--no-race-check): not checked for data races", highlight=False)
    if v.shapes:
        shapes = "; ".join(", ".join(f"{k}={n}" for k, n in shape.items()) for shape in v.shapes)
        console.print(f"  verified on {v.device or 'the device'}: shapes [{shapes}] × {v.seeds} seeds", highlight=False)
    for res in r.resources:
        console.print(f"  kernel {res.describe()} ({res.arch})", highlight=False)
    if r.timing:
        t = r.timing
        console.print(f"  timing: baseline {t.baseline_median_s * 1e3:.3f} ms, candidate {t.candidate_median_s * 1e3:.3f} ms "
                      f"(median of {len(t.candidate_s)}), p={t.p_value:.3g}" + (f" on {t.device}" if t.device else ""), highlight=False)
        if t.eager_median_s:
            vs_compile = f", {t.speedup_vs_compile:.2f}x vs torch.compile" if t.speedup_vs_compile else ""
            console.print(f"  vs the reference: {t.speedup_vs_eager:.2f}x vs eager PyTorch{vs_compile}", highlight=False)
    if r.roofline:
        console.print(f"  roofline: {r.roofline.describe()}", highlight=False)
    if r.flags:
        console.print(f"  flags: {', '.join(r.flags)}")
    if r.log and r.status != "ok":
        console.print(r.log[-2000:], markup=False, highlight=False)
    if r.compiler_report:  # compiler output about the candidate's source: text, not markup
        console.print("  compiler report (gcc):", highlight=False)
        console.print("\n".join(f"    {ln}" for ln in r.compiler_report.splitlines()), markup=False, highlight=False)
    words = shown(r) if v.sizes or v.shapes or r.timing else [r.status, *r.flags]  # what the lines above show
    for line in legend_lines(words, "  "):
        console.print(line, highlight=False, soft_wrap=True)


def print_profile(console: Console, prof: HardwareProfile, path: Path, cached: bool) -> None:
    """`kernopt hw probe`: the machine, bandwidth by threads, peak, balance, and where it came from."""
    fp = prof.fingerprint
    console.print(f"[bold]{fp.cpu_model}[/], {fp.cores} cores, {fp.memory_mb / 1024:.1f} GiB, kernel {fp.kernel}; "
                  f"{fp.sandbox} sandbox, {fp.compiler}", highlight=False)
    table = Table("threads", "triad GB/s", "FP64 GFLOP/s", title="measured in the sandbox", title_justify="left")
    for t in prof.threads:
        table.add_row(str(t), f"{prof.bandwidth_gbps[t]:.1f}", f"{prof.peak_gflops[t]:.1f}" if t in prof.peak_gflops else "-")
    console.print(table)
    cores = max(prof.peak_gflops)
    console.print(f"peak FP64: {prof.peak_1:.1f} GFLOP/s on 1 core, {prof.peak_all:.1f} GFLOP/s on {cores} "
                  f"({prof.vector_bits}-bit FMA)", highlight=False)
    console.print(f"machine balance: {prof.balance:.1f} flop/byte (all cores); bandwidth counts 24 B per triad element "
                  f"(no write-allocate), arrays {prof.array_bytes >> 20} MiB each (LLC {prof.llc_bytes >> 20} MiB), "
                  f"best of {prof.reps}", highlight=False)
    if prof.busy_signs():
        console.print(f"[yellow]note:[/] {prof.busy_signs()}: something else was probably using the machine; "
                      "measure again with --refresh when it is quiet", highlight=False)
    when = f"cached, measured {prof.measured_at} in {prof.probe_s:.1f}s; --refresh measures again" if cached else \
        f"measured in {prof.probe_s:.1f}s"
    console.print(f"{when} ({path})", highlight=False)


def print_runs(console: Console, runs: list[RunStore]) -> None:
    table = Table("run", "task", "status", "candidates", "best", "best speedup")
    for store in runs:
        s = store.summary() or {}
        status = s.get("status", "incomplete (resume with --resume)")
        best = s.get("best_candidate") or "-"
        speed = f"{s['best_speedup']:.2f}x" if s.get("best_speedup") and s.get("best_candidate") else "-"
        n = s.get("candidates", len(store.evaluated()))
        table.add_row(store.run_id, s.get("task", "?"), status, str(n), best, speed)
    console.print(table)


def print_run(console: Console, store: RunStore) -> None:
    s = store.summary() or {}
    console.print(f"[bold]{store.run_id}[/] task {s.get('task', '?')} — {s.get('status', 'incomplete')}", highlight=False)
    table = Table("#", "id", "parent", "author", "status", "speedup", "idea / reason")
    # `kernopt runs diff RUN 0 best` (or `baseline`): the # column is what diff takes
    table.add_row("0", "baseline", "-", "baseline", "-", "1.00x", "the task's own kernel (refer to it as 0 or `baseline`)")
    for i, (c, r) in enumerate(store.evaluated().values(), 1):
        style = status_style(r)
        text = c.idea if r.status == "ok" else f"{c.idea} — {r.reason}"
        # ideas, reasons and authors are run data, not markup ("a[i]" must print as written)
        table.add_row(str(i), c.id, escape(c.parent or "-"), escape(c.author), f"[{style}]{fmt_status(r)}[/]", fmt_speedup(r),
                      escape(text[:120]))
    console.print(table)
    if s.get("best_candidate"):
        console.print(f"best: {s['best_candidate']} {s['best_speedup']:.2f}x (re-measured); files in {store.root / 'best'}")
    results = [r for _, r in store.evaluated().values()]
    if results:  # from the log, so an unfinished run shows it too
        console.print(phase_line({**s, "phases": phase_summary(results)}), highlight=False, soft_wrap=True)


# --------------------------------------------------------------------------- bench
ROW_STYLE = {"faster": "green", "no_speedup": "white", "failed": "red", "timeout": "yellow", "crashed": "bold red"}


class BenchProgress:
    """Live display of a bench: a bar over the tasks (done/total, ETA), one line per running task
    (candidates done/budget, best speedup, last status, host) and a printed line when a task ends."""

    def __init__(self, console: Console, total: int, name: str) -> None:
        self.console = console
        self.name = name
        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(bar_width=24), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("{task.fields[eta]}"), console=console, transient=False)
        self.durations: list[float] = []  # elapsed seconds of the tasks finished in this invocation
        self.skipped = 0
        self.overall = self.progress.add_task(self._overall(), total=total, eta="ETA -:--:--")
        self.lines: dict[str, Any] = {}  # key -> the rich task id of its line
        self.best: dict[str, float | None] = {}
        self.last: dict[str, str] = {}  # key -> the last candidate's status (or message)
        self.phase: dict[str, str] = {}  # key -> the phase of its evaluation in progress

    def __enter__(self) -> BenchProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.progress.stop()

    def _overall(self) -> str:
        skipped = f" ({self.skipped} finished before, skipped)" if self.skipped else ""
        return f"[bold]{escape(self.name)}[/] tasks{skipped}"

    def on_skip(self, result: Any) -> None:
        """A task that had finished in an earlier invocation: not run again, not counted in the bar."""
        self.skipped += 1
        total = self.progress.tasks[self.overall].total or 0
        self.progress.update(self.overall, total=max(total - 1, 0), description=self._overall())
        self.console.print(f"  [dim]{escape(result.key)}: finished before; skipped[/]", highlight=False)

    def on_event(self, ev: Any) -> None:
        if ev.kind == "eval":
            self.best[ev.key] = ev.best_speedup
        if ev.kind == "phase":  # the candidate in progress: its phase after the last finished one's status
            self.phase[ev.key] = ev.text
        else:
            self.last[ev.key] = ev.status if ev.kind == "eval" else (ev.text if ev.kind == "message" else "starting")
            self.phase.pop(ev.key, None)
        best = self.best.get(ev.key)
        last = self.last.get(ev.key, "starting")
        now = f" · now: {escape(self.phase[ev.key][:90])}" if ev.key in self.phase else ""
        desc = (f"  {escape(ev.key)}  best [bold green]{f'{best:.2f}x' if best else '-'}[/] · "
                f"last {escape(last[:32])}{now}" + (f" · {escape(ev.host)}" if ev.host else ""))
        if ev.key not in self.lines:
            self.lines[ev.key] = self.progress.add_task(desc, total=ev.budget or None, completed=ev.done, eta="")
        else:
            self.progress.update(self.lines[ev.key], description=desc, completed=ev.done)

    def on_result(self, r: Any) -> None:
        line = self.lines.pop(r.key, None)
        if line is not None:
            self.progress.remove_task(line)
        self.progress.advance(self.overall)
        self.durations.append(r.elapsed_s)
        task = self.progress.tasks[self.overall]
        left = bench_eta_s(self.durations, int(task.total or 0) - int(task.completed), len(self.lines))
        self.progress.update(self.overall, eta="ETA " + ("-:--:--" if left is None else f"~{fmt_duration(left)}"))
        s = r.summary or {}
        if r.status == "finished":
            if s.get("best_significant") and s.get("best_candidate"):
                ci = s.get("best_ci") or [float("nan"), float("nan")]
                what = f"[green]faster[/] {s['best_speedup']:.2f}x " + escape(f"[{ci[0]:.2f}, {ci[1]:.2f}]")
            else:
                what = "no significant speedup"
            what += f" · {s.get('candidates', 0)} candidates"
        else:
            what = f"[{ROW_STYLE.get(r.status, 'red')}]{r.status}[/]: {escape(r.error)}"
        host = f" · {escape(r.host)}" if r.host else ""
        mark = "[green]✓[/]" if r.status == "finished" else "[red]✗[/]"
        self.console.print(f"{mark} {escape(r.key)}: {what} · {r.elapsed_s:.0f}s{host}", highlight=False, soft_wrap=True)


def fmt_figures(suite: dict[str, Any]) -> str:
    """The suite figures on one line: correctness, fast_p for each p, geometric mean."""
    def num(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    fast = "  ".join(f"fast_{p} {num(v)}" for p, v in suite["fast_p"].items())
    geo = suite.get("geomean_speedup")
    return f"correctness {num(suite['correctness_rate'])}  {fast}  geomean {num(geo)}{'x' if geo is not None else ''}"


def print_bench_summary(console: Console, summary: dict[str, Any], json_path: Path, csv_path: Path) -> None:
    table = Table("task", "status", "speedup", "95% CI", "candidates", "baseline", "time", "error")
    for row in summary["tasks"]:
        style = ROW_STYLE.get(row["status"], "white")
        speed = f"{row['best_speedup']:.2f}x" if row["best_speedup"] is not None else "-"
        ci = f"{row['ci_low']:.2f}–{row['ci_high']:.2f}" if row["ci_low"] is not None and row["ci_high"] is not None else "-"
        base = f"{row['baseline_s'] * 1e3:.3g} ms" if row["baseline_s"] is not None else "-"
        table.add_row(escape(row["key"]), f"[{style}]{row['status']}[/]", speed, ci,
                      f"{row['candidates']} ({row['verified_candidates']} verified)", base, f"{row['elapsed_s']:.0f}s", escape(row["error"][:80]))
    console.print(table)
    s = summary["suite"]
    console.print(fmt_figures(s), highlight=False)
    spend = s["spend"]
    money = f"; model spend ${spend['usd']:.4f}, {spend['tokens']} tokens, {spend['calls']} calls" if spend["calls"] else ""
    console.print(f"{s['finished']}/{s['tasks']} tasks finished; {s['candidates']} candidates ({s['verified_candidates']} verified); "
                  f"{s['elapsed_s']:.0f}s of task time, {s.get('wall_s', 0):.0f}s wall{money}", highlight=False)
    if not summary.get("bench", {}).get("run_config", {}).get("eval", {}).get("race_check", True):
        console.print("[bold yellow]race check: OFF[/] for every task (--no-race-check): OpenMP candidates were not checked "
                      "for data races", highlight=False)
    console.print(escape(f"summary: {json_path}  {csv_path}"), highlight=False)
