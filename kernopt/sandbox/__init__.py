"""Where candidate code runs. `get_sandbox(name)` picks an implementation by short name."""

from __future__ import annotations

from kernopt.sandbox.base import ExecResult, Limits, Sandbox

__all__ = ["ExecResult", "Limits", "Sandbox", "get_sandbox"]
NAMES = ("auto", "docker", "local")


def get_sandbox(name: str, target: str = "") -> Sandbox:
    """Build a sandbox by short name for tasks of `target`. `auto` is docker when an engine answers, else
    the engine's error: never a silent fallback to local. Docker picks the image by target (GPU targets:
    the cuda image, with the GPUs). Heavy dependencies (the docker SDK) are imported only for docker."""
    from kernopt.errors import UserError

    if name not in NAMES:
        raise UserError(f"unknown sandbox {name!r}; choose one of: {', '.join(NAMES)}")
    if name == "local":
        from kernopt.sandbox.local import LocalSandbox

        return LocalSandbox()
    from kernopt.sandbox.docker import DockerSandbox
    from kernopt.sandbox.image import image_kind, image_tag

    kind = image_kind(target)
    return DockerSandbox(image=image_tag(kind), gpus=kind == "cuda")  # no engine or no image: one line saying what to do

