"""Errors a user can cause. The CLI prints them as one line and exits non-zero."""


class UserError(Exception):
    """Something the user can fix: a bad task directory, a missing compiler, a bad run id."""


class TaskError(UserError):
    """A task directory is missing files or declares something invalid."""


class ToolMissing(UserError):
    """A required external program (compiler, mpirun) is not installed."""


class InfraError(Exception):
    """The machinery failed (sandbox, disk), not the candidate. Never scored as a candidate failure."""
