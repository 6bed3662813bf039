"""Where candidate code runs. `get_sandbox(name)` picks an implementation by short name."""

from __future__ import annotations

from kernopt.sandbox.base import ExecResult, Limits, Sandbox

__all__ = ["ExecResult", "Limits", "Sandbox", "get_sandbox"]


def get_sandbox(name: str) -> Sandbox:
    """Build a sandbox by short name. Heavy dependencies are imported only for the chosen one."""
    if name == "local":
        from kernopt.sandbox.local import LocalSandbox

        return LocalSandbox()
    from kernopt.errors import UserError

    raise UserError(f"unknown sandbox {name!r}; available: local (docker arrives with its own issue)")
