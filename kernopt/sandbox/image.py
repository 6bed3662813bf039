"""The sandbox images, built from the Dockerfiles shipped in `images/<kind>/`, tagged by their content.

`cpu` (gcc, clang, OpenMPI, python3) serves every CPU target; `cuda` (NVIDIA's devel image) the GPU
targets, and only online: its base comes from a registry.

`build_image(offline=False)` builds FROM debian:<suite>-slim (needs a registry). `offline=True`
bootstraps the Debian base, packages included, from the package archive with mmdebstrap on this
machine and imports it into the engine (`docker import` through the API, so a remote engine works
too); the Dockerfile then only adds the sandbox user. An image whose tag exists is reused.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from kernopt.errors import InfraError, ToolMissing, UserError

KINDS = ("cpu", "cuda")
GPU_TARGET_PREFIXES = ("cuda", "triton")  # task targets that run on GPUs (and so in the cuda image)
BASE_REPO = "kernopt-base"
SANDBOX_UID = 10001  # the `sandbox` user the Dockerfile adds; candidates run as it
DEFAULT_MIRROR = "http://deb.debian.org/debian"


def image_kind(target: str) -> str:
    """The image a task target runs in."""
    return "cuda" if target.startswith(GPU_TARGET_PREFIXES) else "cpu"


def image_dir(kind: str = "cpu") -> Path:
    return Path(str(resources.files("kernopt.sandbox") / "images" / kind))


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(hashlib.sha256(p).digest())
    return h.hexdigest()[:12]


def image_tag(kind: str = "cpu") -> str:
    """kernopt-<kind>:<hash of the image directory's files (the Dockerfile, the package list)>."""
    d = image_dir(kind)
    return f"kernopt-{kind}:{_digest(*(f.read_bytes() for f in sorted(d.iterdir()) if f.is_file()))}"


def packages() -> list[str]:
    lines = (image_dir() / "packages.txt").read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]


def host_suite() -> str:
    """The Debian suite this machine runs (the offline base matches it), bookworm elsewhere."""
    try:
        fields = dict(ln.split("=", 1) for ln in Path("/etc/os-release").read_text().splitlines() if "=" in ln)
    except OSError:
        return "bookworm"
    return fields.get("VERSION_CODENAME", "").strip('"') if fields.get("ID") == "debian" else "bookworm"


def has_image(client: Any, tag: str) -> bool:
    import docker

    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def bootstrap_base(client: Any, suite: str, mirror: str, say: Callable[[str], None]) -> str:
    """mmdebstrap a Debian root with the image's packages, import it; returns its tag (reused if present)."""
    tag = f"{BASE_REPO}:{_digest(suite.encode(), mirror.encode(), ' '.join(packages()).encode())}"
    if has_image(client, tag):
        say(f"base {tag} present")
        return tag
    if shutil.which("mmdebstrap") is None:
        raise ToolMissing("mmdebstrap not found: install it (apt-get install mmdebstrap) to build the image offline")
    with tempfile.TemporaryDirectory(prefix="kernopt-rootfs-") as tmp:
        tar = Path(tmp) / "rootfs.tar"
        cmd = ["mmdebstrap", "--variant=apt", f"--include={','.join(packages())}", suite, str(tar), mirror]
        say("bootstrapping " + " ".join(cmd[:-2]) + " ...")
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            tail = p.stderr.strip().splitlines()[-1:] or ["?"]
            raise InfraError(f"mmdebstrap failed ({p.returncode}): {tail[0]}")
        say(f"importing {tar.stat().st_size >> 20} MiB as {tag}")
        repo, _, version = tag.partition(":")
        client.api.import_image_from_file(str(tar), repository=repo, tag=version)
    return tag


def build_image(client: Any, offline: bool = False, suite: str | None = None, mirror: str = DEFAULT_MIRROR,
                say: Callable[[str], None] = lambda _: None, kind: str = "cpu") -> tuple[str, bool]:
    """Build the sandbox image of `kind` unless its tag exists. Returns (tag, built now)."""
    import docker

    if kind not in KINDS:
        raise UserError(f"unknown image {kind!r}; choose one of: {', '.join(KINDS)}")
    tag = image_tag(kind)
    if has_image(client, tag):
        return tag, False
    if kind == "cuda" and offline:
        raise UserError("the cuda image has no --offline build: its base (nvidia/cuda) comes from a registry; build it "
                        "where one is reachable and move it with `docker save` / `docker load`")
    if kind == "cuda":
        base = None  # the Dockerfile's own FROM
    else:
        suite = suite or host_suite()
        base = bootstrap_base(client, suite, mirror, say) if offline else f"debian:{suite}-slim"
    say(f"building {tag}" + (f" FROM {base}" if base else ""))
    try:
        client.images.build(path=str(image_dir(kind)), tag=tag, buildargs={"BASE": base} if base else {}, rm=True, forcerm=True,
                            pull=False, network_mode="none" if offline else None)
    except docker.errors.BuildError as e:
        last = next((str(x.get("stream") or x.get("error") or "").strip() for x in reversed(list(e.build_log))
                     if (x.get("stream") or x.get("error") or "").strip()), str(e))
        raise InfraError(f"sandbox image build failed: {last}") from None
    return tag, True
