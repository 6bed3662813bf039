"""Where candidate code runs. `get_sandbox(name)` picks an implementation by short name."""

from __future__ import annotations

from kernopt.sandbox.base import ExecResult, Limits, Sandbox

__all__ = ["ExecResult", "Limits", "Sandbox", "get_sandbox", "resolve_name"]
NAMES = ("auto", "docker", "local")


def resolve_name(name: str) -> str:
    """`auto` -> `docker` when an engine answers; `auto` and `docker` without one: the engine error (never a silent fallback)."""
    from kernopt.errors import UserError

    if name not in NAMES:
        raise UserError(f"unknown sandbox {name!r}; choose one of: {', '.join(NAMES)}")
    if name in ("auto", "docker"):
        from kernopt.sandbox.docker import DockerSandbox

        DockerSandbox()  # no engine or no image: says what to do before anything (a run directory) is created
        return "docker"
    return name


def get_sandbox(name: str) -> Sandbox:
    """Build a sandbox by short name. Heavy dependencies (the docker SDK) are imported only for the chosen one."""
    name = resolve_name(name)
    if name == "local":
        from kernopt.sandbox.local import LocalSandbox

        return LocalSandbox()
    from kernopt.sandbox.docker import DockerSandbox

    return DockerSandbox()
