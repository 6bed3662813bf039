"""`kernopt sandbox check`: the engine, the image, and the limits in effect, measured from inside a
container (not read back from what was asked for)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from kernopt.errors import InfraError
from kernopt.sandbox.base import Limits
from kernopt.sandbox.docker import DockerSandbox

# Runs in the sandbox as the candidate would; prints one JSON object.
PROBE = r"""
import json, os, resource, socket
def first(*paths):
    for p in paths:
        try:
            return open(p).read().strip()
        except OSError:
            pass
    return None
def lim(r):
    soft = resource.getrlimit(r)[0]
    return None if soft == resource.RLIM_INFINITY else soft
def status(key):
    return next((l.split()[1] for l in open("/proc/self/status") if l.startswith(key + ":")), None)
def net():
    try:
        socket.create_connection(("1.1.1.1", 53), 2).close()
        return "reachable"
    except OSError as e:
        return "none (" + (e.strerror or str(e)) + ")"
try:
    open("/kernopt-probe", "w")
    root = "writable"
except OSError:
    root = "read-only"
sv = os.statvfs(".")
print(json.dumps({
    "uid": os.getuid(), "gid": os.getgid(), "no_new_privs": status("NoNewPrivs"), "cap_eff": status("CapEff"),
    "root_fs": root, "network": net(), "interfaces": sorted(os.listdir("/sys/class/net")),
    "pids_max": first("/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/pids/pids.max"),
    "memory_max": first("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"),
    "cpu_max": first("/sys/fs/cgroup/cpu.max") or "%s %s" % (first("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"),
                                                             first("/sys/fs/cgroup/cpu/cpu.cfs_period_us")),
    "nofile": lim(resource.RLIMIT_NOFILE), "fsize_bytes": lim(resource.RLIMIT_FSIZE), "cpu_s": lim(resource.RLIMIT_CPU),
    "workdir_bytes": sv.f_blocks * sv.f_frsize, "workdir_inodes": sv.f_files,
    "gpus": sorted(d for d in os.listdir("/dev") if d.startswith("nvidia") and d[6:].isdigit()),
}))
"""


def check(sandbox: DockerSandbox, limits: Limits | None = None) -> dict[str, Any]:
    """Engine and image facts plus the probe's measurements; `problems` lists containment gaps."""
    limits = limits or Limits(wall_s=30)
    info = sandbox.client.info()
    version = sandbox.client.version()
    image = sandbox.client.images.get(sandbox.image)
    with tempfile.TemporaryDirectory(prefix="kernopt-check-") as d:
        os.chmod(d, 0o755)
        r = sandbox.run(["python3", "-c", PROBE], Path(d), limits)
    if not r.ok:
        raise InfraError(f"the sandbox probe failed ({r.returncode}): {r.stderr.strip()[-300:]}")
    measured = json.loads(r.stdout)
    problems = [why for bad, why in (
        (measured["uid"] == 0, "runs as root"), (measured["root_fs"] != "read-only", "root filesystem is writable"),
        (measured["network"] == "reachable", "network is reachable"), (measured["interfaces"] != ["lo"], "has network interfaces"),
        (measured["no_new_privs"] != "1", "no-new-privileges is off"), (int(measured["cap_eff"] or "1", 16) != 0, "has capabilities"),
        (measured["pids_max"] in (None, "max"), "no pids limit"), (measured["memory_max"] in (None, "max"), "no memory limit"),
    ) if bad]
    return {
        "engine": {"host": os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock"), "version": version.get("Version"),
                   "os": info.get("OperatingSystem"), "kernel": info.get("KernelVersion"), "cpus": info.get("NCPU"),
                   "cgroup": f"v{info.get('CgroupVersion', '?')} ({info.get('CgroupDriver', '?')})",
                   "runtimes": sorted(info.get("Runtimes") or {}), "security": info.get("SecurityOptions") or []},
        "image": {"tag": sandbox.image, "id": image.short_id, "size_mb": round((image.attrs.get("Size") or 0) / 2**20)},
        "requested": limits.model_dump(), "measured": measured,
        "gpu": "visible: " + ", ".join(measured["gpus"]) if measured["gpus"] else "none visible in the sandbox",
        "problems": problems,
    }
