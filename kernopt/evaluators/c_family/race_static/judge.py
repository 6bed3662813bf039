"""The judgement of a construct's accesses for the static race check (kernopt/evaluators/c_family/race_static.py):
two accesses of one shared object, one a write, that may run at once on two threads and touch one element are a
race when that is certain, unknown when it is not proven either way; the dependence analysis proves a
work-sharing loop's iterations disjoint where the subscripts alone do not."""

from __future__ import annotations

from kernopt.evaluators.c_family.race_static.records import Finding, _Acc
from kernopt.evaluators.c_family.race_static.walk import _Region


def judge(region: _Region) -> tuple[list[Finding], list[Finding]]:
    """(races, unknowns)."""
    races: list[Finding] = []
    unknown = list(region.unknown)
    by_name: dict[str, list[_Acc]] = {}
    for a in region.accs:
        by_name.setdefault(a.name, []).append(a)
    proven_by_deps = _dependence_checks(region, by_name, unknown)
    for name, accs in sorted(by_name.items()):
        if not any(a.write for a in accs):
            continue
        found: set[tuple[int, str]] = set()
        for i, a in enumerate(accs):
            for b in accs[i:]:
                if not (a.write or b.write):
                    continue
                verdict = _conflict(region, a, b, proven_by_deps)
                if verdict is None:
                    continue
                where = a if a.write else b
                if verdict == "race":
                    if (where.line, "race") not in found:
                        found.add((where.line, "race"))
                        races.append(Finding(where.line, name, _why(a, b)))
                elif (where.line, "unknown") not in found:
                    found.add((where.line, "unknown"))
                    unknown.append(Finding(where.line, name, "may be accessed by two threads at once (not proven disjoint or ordered)"))
    return races, unknown


def _dependence_checks(region: _Region, by_name: dict[str, list[_Acc]], unknown: list[Finding]) -> set[tuple[int, str]]:
    """(loop, object) pairs whose accesses inside the work-sharing loop the dependence analysis proves disjoint
    between iterations."""
    out: set[tuple[int, str]] = set()
    for lid, lc in region.loops.items():
        need: set[str] = set()
        for name, accs in by_name.items():
            inside = [a for a in accs if a.ctx.who == "loop" and a.ctx.cid == lid]
            if not inside or not any(a.write for a in accs):
                continue
            if any(_pair_needs_deps(a, b) for i, a in enumerate(inside) for b in inside[i:] if a.write or b.write):
                need.add(name)
        if not need:
            continue
        proven, why = region.c.deps_parallel(lc, need)
        out |= {(lid, n) for n in proven}
        if why:
            unknown.append(Finding(region.src.line(lc.node), sorted(need - proven or need)[0], why))
    return out


def _pair_needs_deps(a: _Acc, b: _Acc) -> bool:
    if _common_sync(a, b) or _same_thread(a, b):
        return False
    if a.loc.own and b.loc.own:
        return False
    if a.loc.tid and b.loc.tid and a.ctx.who != "task" and b.ctx.who != "task" and a.ctx.task is None and b.ctx.task is None:
        return False
    return True


def _same_thread(a: _Acc, b: _Acc) -> bool:
    if a.ctx.who == "master" and b.ctx.who == "master":
        return True
    if a.ctx.who == "one" and b.ctx.who == "one" and a.ctx.cid == b.ctx.cid and not a.ctx.multi:
        return True
    return a is b and not a.ctx.multi and a.ctx.who != "all"


def _concurrent(region: _Region, a: _Acc, b: _Acc) -> bool:
    if region.uf.find(a.seg) != region.uf.find(b.seg):
        return False
    for t, g in ((a, b), (b, a)):
        if t.ctx.task is not None and t.ctx.task[0] == g.ctx.thread and g.ctx.task is None:
            gen_thread, gen_epoch, gen_loops = t.ctx.task
            if g.epoch > gen_epoch:
                return False
            if g.epoch < gen_epoch and not set(gen_loops) & set(g.ctx.seqloops):
                return False
        if t.ctx.task is not None and g.ctx.task is not None and t.ctx.task[0] == g.ctx.task[0] and t.ctx.thread != g.ctx.thread:
            if t.ctx.task[1] < g.ctx.task[1] and not set(t.ctx.task[2]) & set(g.ctx.task[2]):
                return False
    return True


def _conflict(region: _Region, a: _Acc, b: _Acc, deps_ok: set[tuple[int, str]]) -> str | None:
    """None: no race between the two; 'race': a certain one; 'unknown': not proven either way."""
    if not _concurrent(region, a, b) or _common_sync(a, b) or _same_thread(a, b):
        return None
    if a is b and not a.ctx.multi and a.ctx.who not in ("all",):
        return None
    la, lb = a.loc, b.loc
    if la.tid and lb.tid and a.ctx.who != "task" and b.ctx.who != "task" and a.ctx.task is None and b.ctx.task is None:
        return None
    if a.ctx.who == "loop" and b.ctx.who == "loop" and a.ctx.cid == b.ctx.cid:
        if (la.own and lb.own) or (a.ctx.cid, a.name) in deps_ok:
            return None
    if la.kind == "elem" and lb.kind == "elem" and la.const is not None and lb.const is not None and la.const != lb.const:
        return None
    same = (la.kind == "scalar" and lb.kind == "scalar") or (
        la.kind == lb.kind == "elem" and la.inv and lb.inv and la.key == lb.key and (not (la.sweep or lb.sweep) or a is b))
    multi = a.ctx.multi or b.ctx.multi or a.ctx.who == "all" or b.ctx.who == "all"
    certain = (same and multi and not region.doubt and not region.serial and not region.c.orphan
               and not a.ctx.selective and not b.ctx.selective and a.definite and b.definite)
    return "race" if certain else "unknown"


def _why(a: _Acc, b: _Acc) -> str:
    if a.write and b.write:
        if "atomic" in a.ctx.sync or "atomic" in b.ctx.sync or any(s.startswith("critical") for s in a.ctx.sync | b.ctx.sync):
            return "written by several threads under different synchronization"
        return "written by several threads without synchronization"
    return "read without synchronization while other threads write it"


def _common_sync(a: _Acc, b: _Acc) -> bool:
    return bool(a.ctx.sync & b.ctx.sync)
