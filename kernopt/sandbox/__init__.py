"""Where candidate code runs. `get_sandbox(name)` picks an implementation by short name."""

from __future__ import annotations

from kernopt.sandbox.base import ExecResult, Limits, Sandbox

__all__ = ["ExecResult", "Limits", "Sandbox", "get_sandbox"]
NAMES = ("auto", "docker", "local")


def get_sandbox(name: str) -> Sandbox:
    """Build a sandbox by short name. `auto` is docker when an engine answers, else the engine's error:
    never a silent fallback to local. Heavy dependencies (the docker SDK) are imported only for docker."""
    from kernopt.errors import UserError

    if name not in NAMES:
        raise UserError(f"unknown sandbox {name!r}; choose one of: {', '.join(NAMES)}")
    if name == "local":
        from kernopt.sandbox.local import LocalSandbox

        return LocalSandbox()
    from kernopt.sandbox.docker import DockerSandbox

    return DockerSandbox()  # no engine or no image: one line saying what to do

