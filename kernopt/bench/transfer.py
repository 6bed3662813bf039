"""Run directories between machines (the Ray executor): a directory as tar.gz bytes, unpacked without
letting an archive write outside its destination, the run's recorded paths pointed at where it now is,
and swapped in over the old directory so a killed driver leaves the old one or the new one, never half."""

from __future__ import annotations

import ctypes
import io
import json
import os
import secrets
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernopt.bench.work import WorkItem


def pack(root: Path, dereference: bool = False) -> bytes:
    """A directory's contents as tar.gz bytes (members relative to it)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6, dereference=dereference) as tar:
        for child in sorted(root.iterdir()):
            tar.add(child, arcname=child.name)
    return buf.getvalue()


def unpack(data: bytes, dest: Path) -> None:
    """tar.gz bytes into dest, refusing absolute paths, links out of dest and special files."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
        else:  # Python before 3.11.4 (Debian 12's 3.11.2): the same refusals, by hand
            tar.extractall(dest, members=_checked_members(tar, dest))


def _checked_members(tar: tarfile.TarFile, dest: Path) -> list[tarfile.TarInfo]:
    root = dest.resolve()

    def inside(path: Path) -> bool:
        return path == root or root in path.parents

    out = []
    for m in tar.getmembers():
        target = (root / m.name).resolve()
        if Path(m.name).is_absolute() or not inside(target):
            raise tarfile.TarError(f"{m.name}: a path out of the destination")
        if m.issym() or m.islnk():
            link = (target.parent / m.linkname if m.issym() else root / m.linkname).resolve()
            if Path(m.linkname).is_absolute() or not inside(link):
                raise tarfile.TarError(f"{m.name}: a link out of the destination")
        elif not (m.isfile() or m.isdir()):
            raise tarfile.TarError(f"{m.name}: a special file")
        out.append(m)
    return out


def _rewrite_json(path: Path, update: Callable[[dict[str, Any]], None]) -> None:
    """Change one JSON file in place (atomically, in RunStore's format); absent or unreadable: left alone."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    if not isinstance(data, dict):
        return
    update(data)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def _point_run_dir(run_dir: Path, task: str, runs_dir: str, value_path: str | None, summary_run_dir: str) -> None:
    """Make a run directory's recorded paths those of the machine it is on."""
    def config(c: dict[str, Any]) -> None:
        c["task"], c["runs_dir"] = task, runs_dir
        if isinstance(c.get("search"), dict) and "value_path" in c["search"]:
            c["search"]["value_path"] = value_path

    _rewrite_json(run_dir / "config.json", config)
    _rewrite_json(run_dir / "summary.json", lambda s: s.update(run_dir=summary_run_dir) if "run_dir" in s else None)


def install_run_dir(archive: bytes, item: WorkItem) -> None:
    """Unpack a run directory that came back from a node over item.run_dir, with the driver's paths in it.
    Unpacked next to it first, then swapped in, so a kill leaves the old directory or the new one."""
    target = Path(item.run_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    incoming = target.with_name(f".{target.name}.incoming-{secrets.token_hex(4)}")
    incoming.mkdir()
    try:
        unpack(archive, incoming)
        value = item.config.search.value_path
        _point_run_dir(incoming, str(Path(item.config.task).resolve()), str(target.parent), str(value) if value else None, str(target))
        if not target.exists():
            os.rename(incoming, target)
        elif _exchange(incoming, target):
            shutil.rmtree(incoming, ignore_errors=True)  # now the old directory
        else:
            old = target.with_name(f".{target.name}.old-{secrets.token_hex(4)}")
            os.rename(target, old)  # a kill here leaves `old`, which _recover puts back
            os.rename(incoming, target)
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if incoming.exists():
            shutil.rmtree(incoming, ignore_errors=True)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux renameat2 RENAME_EXCHANGE); False where that is not available."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    return fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def _recover(target: Path) -> None:
    """Tidy what a killed driver left next to a run directory: unpacked halves go, a set-aside one comes back."""
    if not target.parent.is_dir():
        return
    for leftover in target.parent.glob(f".{target.name}.incoming-*"):
        shutil.rmtree(leftover, ignore_errors=True)
    for old in sorted(target.parent.glob(f".{target.name}.old-*")):
        if not target.exists():
            os.rename(old, target)
        else:
            shutil.rmtree(old, ignore_errors=True)
