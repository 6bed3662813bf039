"""Moving a work directory into and out of a container as tar streams, defensively.

In: the directories and regular files of the host's work directory (unpacked by the step's uid).
Out: the tar the step's wrapper makes of its directory, extracted so that nothing in it can write
outside the destination, create a link or device on the host, or fill the host's disk.
"""

from __future__ import annotations

import io
import os
import shutil
import stat
import tarfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any


def pack(workdir: Path) -> bytes:
    """The workdir's directories and regular files as a tar (links and devices are skipped). The step
    unpacks it as its own unprivileged uid, so the files are that uid's whatever the tar says."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for dirpath, dirnames, filenames in os.walk(workdir):
            for name in sorted(dirnames) + sorted(filenames):
                path = Path(dirpath) / name
                st = os.lstat(path)
                if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
                    continue
                info = tarfile.TarInfo(str(path.relative_to(workdir)))
                info.mode, info.mtime = stat.S_IMODE(st.st_mode) | 0o600, int(st.st_mtime)
                if stat.S_ISDIR(st.st_mode):
                    info.type = tarfile.DIRTYPE
                    tar.addfile(info)
                else:
                    info.size = st.st_size
                    with open(path, "rb") as f:
                        tar.addfile(info, f)
    return buf.getvalue()


class _Chunks(io.RawIOBase):
    """A file over the engine's archive stream that refuses to read past `limit` bytes."""

    def __init__(self, chunks: Iterator[bytes], limit: int) -> None:
        self.chunks, self.limit, self.total, self.pending = chunks, limit, 0, b""

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not self.pending:
            nxt = next(self.chunks, None)
            if nxt is None:
                return 0
            self.pending = nxt
        n = min(len(b), len(self.pending))
        b[:n], self.pending = self.pending[:n], self.pending[n:]
        self.total += n
        if self.total > self.limit:
            raise _TooLarge
        return n


class _TooLarge(Exception):
    pass


def _safe_rel(name: str) -> list[str]:
    """A member name as parts below the work directory."""
    parts = PurePosixPath(name).parts
    if name.startswith("/") or ".." in parts:
        raise OSError(f"unsafe name in the engine's archive: {name!r}")
    return [p for p in parts if p != "."]


def extract(chunks: Iterator[bytes], dest: Path, limit: int) -> str:
    """Extract a tar made inside the work directory (`tar -c .`) into the empty directory `dest`.

    Only directories and regular files are created, never links, devices or fifos (a hard link
    becomes a copy: many links to one big file cost no space in the container but would here, so
    copies count against `limit` like everything else). Names must be relative, without `..`.
    Returns a note for stderr when something was left out."""
    skipped, written, note = 0, 0, ""

    def create(target: Path, mode: int, src: Any) -> None:
        target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        # O_EXCL|O_NOFOLLOW: a fresh file in a directory only we created; never through a link
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode & 0o755 | 0o600)
        with os.fdopen(fd, "wb") as f:
            shutil.copyfileobj(src, f, 1 << 20)

    try:
        with tarfile.open(fileobj=io.BufferedReader(_Chunks(chunks, limit), 1 << 20), mode="r|") as tar:
            for m in tar:
                rel = _safe_rel(m.name)
                if not rel:
                    continue
                target = dest.joinpath(*rel)
                if m.isdir():
                    target.mkdir(mode=0o755, parents=True, exist_ok=True)
                    continue
                source = dest.joinpath(*_safe_rel(m.linkname)) if m.islnk() else None
                if not (m.isreg() or (source is not None and stat.S_ISREG(os.lstat(source).st_mode))):
                    skipped += 1
                    continue
                written += m.size if source is None else os.lstat(source).st_size
                if written > limit:
                    raise _TooLarge
                if source is None:
                    create(target, m.mode, tar.extractfile(m))
                else:
                    with open(source, "rb") as src:
                        create(target, m.mode, src)
    except _TooLarge:
        note = f"kernopt: the work directory's files exceed {limit >> 20} MiB; the rest was not copied back"
    if skipped:
        note += f"\nkernopt: {skipped} symlinks/devices/fifos in the work directory were not copied back"
    return note.strip()
