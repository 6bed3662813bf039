"""What the static race check (kernopt/evaluators/c_family/race_static.py) records while it walks a construct:
findings, and each memory access with its element, its context (who runs it, under what synchronization) and its
phase; and the work-sharing loops it met."""

from __future__ import annotations

from dataclasses import dataclass

import tree_sitter as ts

from kernopt.evaluators.c_family.race_static.syntax import _IDENT


@dataclass(frozen=True)
class Finding:
    """One place: a line of the kernel source, the shared variable or array, and why (the checker's own words)."""

    line: int
    name: str
    why: str

    def __post_init__(self) -> None:
        if not _IDENT.fullmatch(self.name):
            object.__setattr__(self, "name", "?")


@dataclass(frozen=True)
class _Loc:
    kind: str  # "scalar" | "elem" | "any"
    key: str = ""
    inv: bool = False  # the same element(s) in every thread, iteration and instance
    tid: bool = False  # this thread's own element
    own: bool = False  # the work-sharing iteration's own element
    sweep: bool = False  # inv through the variables of loops inside the instance
    const: int | None = None


@dataclass(frozen=True)
class _Ctx:
    who: str  # "all" | "loop" | "one" | "master" | "task"
    cid: int  # the construct (a loop ctx: the loop's node id)
    multi: bool  # several instances may run at once
    thread: int  # the sequential code's construct (epochs of taskwait count per thread code)
    private: frozenset[str] = frozenset()
    tids: frozenset[str] = frozenset()
    loopvars: tuple[str, ...] = ()
    sweeps: frozenset[str] = frozenset()
    sync: frozenset[str] = frozenset()
    barrier_ok: bool = True
    selective: bool = False
    seqloops: tuple[int, ...] = ()
    task: tuple[int, int, tuple[int, ...]] | None = None  # (generating thread code, its epoch, its loops)
    in_rep_loop: bool = False
    ordered: int | None = None  # the loop whose `ordered` blocks exclude one another


@dataclass
class _Acc:
    name: str
    write: bool
    loc: _Loc
    ctx: _Ctx
    seg: int
    epoch: int
    line: int
    node_id: int
    definite: bool = True


@dataclass
class _LoopCtx:
    node: ts.Node
    func: ts.Node
    vars: tuple[str, ...]
    collapse: int
