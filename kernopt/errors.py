"""Errors a user can cause. The CLI prints them as one line and exits non-zero."""


class UserError(Exception):
    """Something the user can fix: a bad task directory, a missing compiler, a bad run id."""


class TaskError(UserError):
    """A task directory is missing files or declares something invalid."""


class ToolMissing(UserError):
    """A required external program (compiler, mpirun) is not installed."""


class InfraError(Exception):
    """The machinery failed (sandbox, disk), not the candidate. Never scored as a candidate failure."""


class TaskBuildError(InfraError):
    """The task's own harness or baseline does not compile. Inside a run it stops the run like any
    infrastructure failure; the CLI reports it as the task author's to fix (one line, exit 2)."""

    def one_line(self) -> str:
        """The message's head with the compiler's `error:` line (its first line when none says error:)."""
        text = str(self)
        head = text.split(":", 1)[0]
        first = next((ln.strip() for ln in text.splitlines() if "error:" in ln), text.splitlines()[0])
        return first[:400] if first.startswith(head) else f"{head}: {first[:300]}"
