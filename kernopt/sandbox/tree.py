"""Walking, copying and removing directory trees that a sandboxed command may have shaped.

A candidate controls what it leaves in its work directory: a 1500-level chain of directories (past
Python's recursion limit, and with paths longer than PATH_MAX), directories of mode 000, symlinks to
any host file, a fifo where a file was. So everything here is iterative, goes through directory fds
one level at a time (no path is ever longer than one name), never follows a symlink, holds one
directory fd at a time however deep the tree, and reports failure as InfraError (or TreeBound for a
walk past its bounds), never RecursionError or a bare OSError.

The trees are quiescent: callers walk them after every process of the step is dead. The checks
against a tree changing under the walk (parent identity on the way up, O_NOFOLLOW, fstat after open)
make a surprise an InfraError, never a walk into another part of the host.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path

from kernopt.errors import InfraError

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 20

# on_entry(dir_fd, name, lstat) -> whether to descend (directories only); on_enter(name) after the
# walk has entered that directory; on_leave(parent_fd, name) when it is done with it and back in its parent.
OnEntry = Callable[[int, str, os.stat_result], bool]
OnEnter = Callable[[str], None]
OnLeave = Callable[[int, str], None]


class TreeBound(Exception):
    """A walk met more entries, deeper directories or more time than it was allowed."""


def _ident(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def chmod_nofollow(name: str, mode: int | Callable[[int], int], dir_fd: int | None = None) -> None:
    """chmod `name` (relative to `dir_fd`) unless it is a symlink, which is left alone (Linux's fchmodat
    cannot refuse to follow one): an O_PATH fd names the very inode, and /proc/self/fd/N reaches it by
    that fd. `mode` may be a function of the current permission bits."""
    fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISLNK(st.st_mode):
            os.chmod(f"/proc/self/fd/{fd}", mode(stat.S_IMODE(st.st_mode)) if callable(mode) else mode)
    finally:
        os.close(fd)


def _open_dir(name: str, dir_fd: int | None, fix_perms: bool) -> int:
    """Open a directory (never a symlink to one). `fix_perms`: a directory we may not read, search or
    write (a candidate left it mode 000) is given u+rwx first; root needs none of that."""
    try:
        fd = os.open(name, _DIR, dir_fd=dir_fd)
    except PermissionError:
        if not fix_perms:
            raise
        chmod_nofollow(name, lambda m: m | 0o700, dir_fd)
        fd = os.open(name, _DIR, dir_fd=dir_fd)
    if fix_perms:
        mode = os.fstat(fd).st_mode
        if mode & 0o700 != 0o700:  # readable but not searchable or writable: its entries could not be removed
            os.fchmod(fd, stat.S_IMODE(mode) | 0o700)
    return fd


def walk(top: Path, on_entry: OnEntry, *, on_enter: OnEnter | None = None, on_leave: OnLeave | None = None,
         max_entries: int | None = None, max_depth: int | None = None, timeout_s: float | None = None,
         fix_perms: bool = False) -> int:
    """Visit every entry under directory `top` (not `top` itself), depth first, each directory's entries
    before its subdirectories. Returns how many entries were visited. Raises TreeBound past `max_entries`,
    when asked to enter a directory `max_depth` levels down (top's entries are level 1), or past
    `timeout_s`; InfraError for anything the file system refuses. Entries that vanish are skipped."""
    end = time.monotonic() + timeout_s if timeout_s is not None else None
    count = 0
    try:
        fd = _open_dir(str(top), None, fix_perms)
    except OSError as e:
        raise InfraError(f"cannot walk {top}: {e}") from None

    def scan(dir_fd: int) -> list[str]:
        nonlocal count
        descend = []
        for name in os.listdir(dir_fd):
            count += 1
            if max_entries is not None and count > max_entries:
                raise TreeBound(f"more than {max_entries} files and directories")
            if end is not None and time.monotonic() > end:
                raise TreeBound(f"more than {timeout_s:.0f} s to walk")
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if on_entry(dir_fd, name, st) and stat.S_ISDIR(st.st_mode):
                descend.append(name)
        return descend

    # One level per element: the directory's name in its parent, its identity (to check the way back
    # up through ".."), the subdirectories still to enter. Only the deepest level holds an open fd.
    stack: list[tuple[str, tuple[int, int], list[str]]] = []
    try:
        stack.append(("", _ident(fd), scan(fd)))
        while stack:
            name, ident, pending = stack[-1]
            if pending:
                child = pending.pop()
                if max_depth is not None and len(stack) >= max_depth:
                    raise TreeBound(f"directories nested deeper than {max_depth} levels")
                try:
                    child_fd = _open_dir(child, fd, fix_perms)
                except FileNotFoundError:
                    continue
                os.close(fd)
                fd = child_fd
                stack.append((child, _ident(fd), []))
                if on_enter is not None:
                    on_enter(child)
                stack[-1][2].extend(scan(fd))
                continue
            stack.pop()
            if not stack:
                break
            parent = os.open("..", _DIR, dir_fd=fd)
            os.close(fd)
            fd = parent
            if _ident(fd) != stack[-1][1]:
                raise InfraError(f"{top} changed while it was walked (a directory moved)")
            if on_leave is not None:
                on_leave(fd, name)
    except OSError as e:
        raise InfraError(f"cannot walk {top}: {e}") from None
    finally:
        os.close(fd)
    return count


def remove_tree(path: Path, timeout_s: float = 600.0) -> None:
    """Remove `path` and everything under it, whatever a candidate made of it: any depth, directories
    of mode 000, symlinks (removed, never followed). A missing path is fine. Raises InfraError when
    something cannot be removed or it takes longer than `timeout_s`."""
    path = Path(path)
    try:
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(path)
            return
    except FileNotFoundError:
        return
    except OSError as e:
        raise InfraError(f"cannot remove {path}: {e}") from None

    def entry(dir_fd: int, name: str, st: os.stat_result) -> bool:
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(name, dir_fd=dir_fd)
            return False
        try:
            os.rmdir(name, dir_fd=dir_fd)  # an empty one needs no visit (wide trees of empty directories)
            return False
        except OSError as e:
            if e.errno in (errno.ENOTEMPTY, errno.EEXIST):
                return True
            if e.errno == errno.ENOENT:
                return False
            raise

    def leave(parent_fd: int, name: str) -> None:
        os.rmdir(name, dir_fd=parent_fd)

    try:
        walk(path, entry, on_leave=leave, timeout_s=timeout_s, fix_perms=True)
        os.rmdir(path)
    except TreeBound as e:
        raise InfraError(f"cannot remove {path}: {e}") from None
    except FileNotFoundError:
        pass
    except OSError as e:
        raise InfraError(f"cannot remove {path}: {e}") from None


def clear_dir(path: Path, timeout_s: float = 600.0) -> None:
    """Remove everything in directory `path`, keeping the directory itself (see remove_tree)."""
    try:
        names = os.listdir(path)
    except OSError as e:
        raise InfraError(f"cannot clear {path}: {e}") from None
    end = time.monotonic() + timeout_s
    for name in names:
        remove_tree(Path(path) / name, max(1.0, end - time.monotonic()))


def copy_tree(src: Path, dst: Path, *, owner: tuple[int, int] | None = None, mode_mask: int = 0o7777,
              max_entries: int | None = None, max_depth: int | None = None, timeout_s: float | None = None) -> int:
    """Copy what directory `src` holds into the existing directory `dst`: directories and regular files
    only (symlinks, fifos, sockets and devices are left out: a link copied out of a sandbox could point
    at any host file), contents by value (a hard link becomes a copy), modes masked by `mode_mask`,
    lchown'd to `owner` if given. A file is opened without following links and checked to be the regular
    file that was listed, so nothing but the listed file is ever read. Bounds and errors as walk()'s;
    what was copied before an error stays. Returns how many entries were seen."""
    try:
        dst_fds = [os.open(dst, _DIR)]
    except OSError as e:
        raise InfraError(f"cannot copy into {dst}: {e}") from None

    def entry(dir_fd: int, name: str, st: os.stat_result) -> bool:
        if stat.S_ISDIR(st.st_mode):
            os.mkdir(name, 0o700, dir_fd=dst_fds[-1])  # its own mode once its contents are in (on_leave)
            return True
        if stat.S_ISREG(st.st_mode):
            _copy_file(dir_fd, name, st, dst_fds[-1], stat.S_IMODE(st.st_mode) & mode_mask, owner)
        return False

    def enter(name: str) -> None:
        dst_fds.append(os.open(name, _DIR, dir_fd=dst_fds[-1]))

    def leave(parent_fd: int, name: str) -> None:
        fd = dst_fds.pop()
        try:
            st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
            os.fchmod(fd, stat.S_IMODE(st.st_mode) & mode_mask)
            if owner is not None:
                os.fchown(fd, *owner)
        finally:
            os.close(fd)

    try:
        return walk(src, entry, on_enter=enter, on_leave=leave, max_entries=max_entries, max_depth=max_depth,
                    timeout_s=timeout_s)
    finally:
        for fd in dst_fds:
            os.close(fd)


def _copy_file(src_dir: int, name: str, st: os.stat_result, dst_dir: int, mode: int, owner: tuple[int, int] | None) -> None:
    # O_NONBLOCK: should a fifo have replaced the file, opening it must not wait for a writer.
    src = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=src_dir)
    try:
        now = os.fstat(src)
        if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            raise InfraError(f"{name} changed while it was copied")
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dst_dir)
        try:
            offset = 0
            while True:
                n = os.sendfile(out, src, offset, _CHUNK)
                if n == 0:
                    break
                offset += n
            if owner is not None:
                os.fchown(out, *owner)
            os.fchmod(out, mode)  # after fchown, which clears setuid/setgid bits
        finally:
            os.close(out)
    finally:
        os.close(src)
