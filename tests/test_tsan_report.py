"""The race check's report file, read as the candidate's to forge (kernopt/evaluators/c_family/tsan_report.py).

A real report (clang 14, symbolize=0, from a racy reduction run behind the sanitizer's system-call filter)
is parsed to numbers; kernopt's own symbolization names the place; anything ThreadSanitizer does not
print makes the file `forged`; no text of the file ever reaches what kernopt states.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernopt.evaluators.c_family import race, tsan_report
from kernopt.evaluators.c_family.tsan_report import Forged, Place

REAL = (Path(__file__).resolve().parent / "data" / "tsan_report_race.txt").read_text()
SOURCES = {"kernel.c": 12, "driver.c": 300, "harness.c": 80}
# What addr2line says of the real report's offsets into the binary (kernopt's symbolization, not the file's).
PLACES = {0xd163d: Place(".omp_outlined._debug__", "kernel.c", 9), 0xd1499: Place("kernel", "kernel.c", 8),
          0xd13f8: Place("ko_call", "harness.c", 40), 0xd0aa7: Place("main", "driver.c", 247),
          0x5141d: Place("__interceptor_pthread_create", "??", 0)}
DEFINED = {".omp_outlined.", "kernel"}


def test_real_report_is_one_race_stated_in_kernopts_words() -> None:
    parsed = tsan_report.parse(REAL, "prog")
    assert len(parsed.races) == 1 and not parsed.crash
    r = parsed.races[0]
    assert r.current.kind == "write" and r.current.thread == "thread T2" and r.previous is not None
    assert [f.module for f in r.current.frames] == ["prog", "libomp.so.5", "prog"]
    assert sorted(tsan_report.offsets(parsed, "prog")) == sorted({0xd163d, 0xd1499, 0xd13f8, 0xd0aa7})  # not the threads' creation
    text = tsan_report.describe(r, PLACES, "prog", SOURCES, DEFINED)
    assert text == ("kernel.c:9 in .omp_outlined._debug__ (a write by thread T2; the previous write by the main thread "
                    "at kernel.c:9 in .omp_outlined._debug__)")
    j = race.judge(REAL, lambda _: PLACES, SOURCES, DEFINED)
    assert j.races == [text] and not j.forged


@pytest.mark.parametrize("line", [
    "root:x:0:0:root:/root:/bin/bash",  # a host file's line
    "    #0 kernel /etc/passwd:1 (prog+0xd163d)",  # a symbolized frame: the program never symbolizes (symbolize=0)
    "  Location is global 'secret-text' at 0x0 (prog+0x10)",
    "WARNING: ThreadSanitizer: data race",  # no pid
    "SUMMARY: ThreadSanitizer: data race /tmp/kernel.c:9 in kernel",
])
def test_any_other_line_is_forged(line: str) -> None:
    text = REAL.replace("  Location is stack of main thread.\n", f"  Location is stack of main thread.\n{line}\n")
    j = race.judge(text, lambda _: PLACES, SOURCES, DEFINED)
    assert j.forged and not j.races
    assert line.split()[0] not in j.forged  # kernopt's phrase, not the file's text


def test_a_frame_in_an_unknown_module_is_forged() -> None:
    with pytest.raises(Forged):
        tsan_report.parse(REAL.replace("(libomp.so.5+0xd55a2)", "(passwd+0xd55a2)", 1), "prog")


def test_a_racy_access_at_no_code_is_forged() -> None:
    r = tsan_report.parse(REAL.replace("prog+0xd163d", "prog+0xdead0"), "prog").races[0]
    with pytest.raises(Forged):
        tsan_report.describe(r, {**PLACES, 0xdead0: Place("??", "??", 0)}, "prog", SOURCES, DEFINED)


def test_places_outside_the_sources_or_not_defined_are_not_named() -> None:
    """A line past the kernel's end, a file that is none of the program's sources, a function the kernel object
    does not define: not printed as such."""
    r = tsan_report.parse(REAL, "prog").races[0]
    far = {**PLACES, 0xd163d: Place(".omp_outlined._debug__", "kernel.c", 999), 0xd1499: Place("kernel", "passwd", 3)}
    assert tsan_report.describe(r, far, "prog", SOURCES, DEFINED).startswith("a place outside the kernel's source (a write")
    other = {**PLACES, 0xd163d: Place("strcpy", "kernel.c", 9)}
    assert tsan_report.describe(r, other, "prog", SOURCES, DEFINED).startswith("kernel.c:9 in ? ")


def test_reports_on_runtime_memory_are_not_counted() -> None:
    """A task descriptor libomp allocated and reused (a false report, ~3% of runs of race-free task code): not
    counted. The same report on the kernel's own heap block, or on memory it asked the runtime for, counts."""
    heap = ("  Location is heap block of size 1048576 at 0x7f9d84220000 allocated by main thread:\n"
            "    #0 <null> <null> (prog+0x4fc61) (BuildId: 853d)\n"
            "    #1 <null> <null> (libomp.so.5+0x20919) (BuildId: e9e0)\n")
    text = REAL.replace("  Location is stack of main thread.\n", heap)
    places = {**PLACES, 0x4fc61: Place("__interceptor_malloc", "??", 0)}
    j = race.judge(text, lambda _: places, SOURCES, DEFINED)
    assert j.runtime == 1 and not j.races and not j.forged
    asked = {**places, 0x4fc61: Place("omp_alloc", "??", 0)}
    assert race.judge(text, lambda _: asked, SOURCES, DEFINED).races
    own = text.replace("(libomp.so.5+0x20919)", "(prog+0xd1499)")
    assert race.judge(own, lambda _: places, SOURCES, DEFINED).races


def test_sanitizer_crash_is_a_fixed_phrase() -> None:
    crash = ("ThreadSanitizer:DEADLYSIGNAL\n==4444==ERROR: ThreadSanitizer: SEGV on unknown address 0x000000000000 "
             "(pc 0x7f) root:x:0:0\n    #0 <null> <null> (libarcher.so+0x4254) (BuildId: 3e10)\n")
    j = race.judge(crash, lambda _: {}, SOURCES, DEFINED)
    assert not j.races and not j.forged and j.crash == "ThreadSanitizer crashed"


def test_empty_file_is_clean() -> None:
    j = race.judge("", lambda _: {}, SOURCES, DEFINED)
    assert not (j.races or j.forged or j.crash)


def test_addr2line_output() -> None:
    out = "0x00000000000d163d\n.omp_outlined._debug__\n/tmp/race-1/kernel.c:9\n0x0000000099999999\n??\n??:0\n"
    places = tsan_report.read_addr2line(out)
    assert places[0xd163d] == Place(".omp_outlined._debug__", "kernel.c", 9) and places[0x99999999].function == "??"
