"""Containment and cleanup of the local sandbox, with real gcc-built hostile programs."""

from __future__ import annotations

import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kernopt.sandbox import ExecResult, Limits, get_sandbox
from kernopt.sandbox.local import MARKER, _Capture
from tests.conftest import build_c_program, enterable_tmpdir, zombie_children

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="privilege drop needs root")
pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc missing")

PROGRAMS = {
    "spin": "int main(void){volatile unsigned long x=0;for(;;)x++;}",
    "sleeper": "#include <unistd.h>\nint main(void){sleep(1000);return 0;}",
    # stdin is /dev/null (EOF at once); then block on a pipe nobody writes
    "blockread": """#include <unistd.h>
int main(void){char c;int p[2];if(read(0,&c,1)!=0)return 3;pipe(p);read(p[0],&c,1);return 0;}""",
    "ignoreterm": """#include <signal.h>
#include <unistd.h>
int main(void){signal(SIGTERM,SIG_IGN);signal(SIGINT,SIG_IGN);signal(SIGHUP,SIG_IGN);for(;;)pause();}""",
    # setsid + double fork; the grandchild records its pid and sleeps forever (argv[1]=="noenv":
    # it re-execs sleep with an empty environment, dropping the marker variable)
    "daemon": """#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc,char**argv){
  if(fork()==0){setsid();if(fork()==0){
    FILE*f=fopen("daemon.pid","w");fprintf(f,"%d\\n",getpid());fclose(f);
    if(argc>1&&!strcmp(argv[1],"noenv")){char*a[]={"sleep","1000",0};char*e[]={0};execve("/bin/sleep",a,e);}
    for(;;)sleep(1000);}
    _exit(0);}
  sleep(1);return 0;}""",
    "bigmem": """#include <stdio.h>
#include <stdlib.h>
int main(void){size_t n=(size_t)8<<30;char*p=malloc(n);if(!p){puts("malloc failed");return 1;}
for(size_t i=0;i<n;i+=4096)p[i]=1;puts("allocated");return 0;}""",
    "flood": """#include <string.h>
#include <unistd.h>
static char b[1<<20];
int main(void){memset(b,'x',sizeof b);
for(int i=0;i<200;i++){size_t o=0;while(o<sizeof b){ssize_t w=write(1,b+o,sizeof b-o);if(w<=0)return 1;o+=w;}}
return 0;}""",
    "forkbomb": "#include <unistd.h>\nint main(void){for(;;)fork();}",
    "threadbomb": """#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
static void*f(void*a){(void)a;for(;;)sleep(1000);return 0;}
int main(void){pthread_t t;int n=0;pthread_attr_t at;pthread_attr_init(&at);pthread_attr_setstacksize(&at,65536);
while(n<100000&&pthread_create(&t,&at,f,0)==0)n++;printf("%d\\n",n);return 0;}""",
    "fds": """#include <fcntl.h>
#include <stdio.h>
int main(void){int n=0;while(n<1000000&&open("/dev/null",O_RDONLY)>=0)n++;printf("%d\\n",n);return 0;}""",
    "environ": """#include <stdio.h>
extern char**environ;int main(void){for(char**e=environ;*e;e++)puts(*e);return 0;}""",
    "writer": """#include <stdio.h>
#include <unistd.h>
int main(int argc,char**argv){char d[4096];getcwd(d,sizeof d);puts(d);
for(int i=1;i<argc;i++){FILE*f=fopen(argv[i],"w");printf("%s %s\\n",argv[i],f?"ok":"denied");if(f){fputs("hi",f);fclose(f);}}
return 0;}""",
    "killall": """#include <signal.h>
#include <stdio.h>
int main(void){printf("%d\\n",kill(-1,SIGKILL));return 0;}""",
}


@pytest.fixture(scope="module")
def base() -> Iterator[Path]:
    with enterable_tmpdir("kernopt-sbx-test-") as d:
        yield d


@pytest.fixture(scope="module")
def build(base: Path) -> Callable[[str], str]:
    bins = base / "bin"
    bins.mkdir(mode=0o755)
    return lambda name: str(build_c_program(bins, name, PROGRAMS[name]))


@pytest.fixture
def workdir(base: Path) -> Path:
    d = base / uuid.uuid4().hex[:8]
    d.mkdir(mode=0o755)
    return d


def tagged_pids(tag: str) -> list[int]:
    """Live processes whose environment holds `tag` (and the sandbox marker)."""
    found = []
    for name in os.listdir("/proc"):
        try:
            env = Path(f"/proc/{name}/environ").read_bytes() if name.isdigit() else b""
        except OSError:
            continue
        if tag.encode() in env and MARKER.encode() in env:
            found.append(int(name))
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def run(command: list[str], workdir: Path, solo: bool = True, **limits: float) -> tuple[ExecResult, float]:
    """Run tagged, assert nothing tagged survives, return the result and the host-side duration.
    `solo=False` when other runs are in flight: their teardown briefly leaves zombies with us."""
    tag = f"KERNOPT_TEST_TAG={uuid.uuid4().hex}"
    t0 = time.monotonic()
    r = get_sandbox("local").run(command, workdir, Limits(**limits), {"KERNOPT_TEST_TAG": tag.split("=")[1]})
    took = time.monotonic() - t0
    assert tagged_pids(tag) == []
    if ROOT and solo:
        assert zombie_children() == []
    return r, took


@pytest.mark.parametrize("prog", ["spin", "sleeper", "blockread", "ignoreterm"])
def test_wall_clock_kills(build: Callable[[str], str], workdir: Path, prog: str) -> None:
    r, took = run([build(prog)], workdir, wall_s=1.0)
    assert r.timed_out and r.returncode == -9 and not r.ok
    assert 1.0 <= r.wall_s < 1.5 and took < 2.0


@pytest.mark.parametrize("variant", ["env", pytest.param("noenv", marks=needs_root)])
def test_double_fork_daemon_dies(build: Callable[[str], str], workdir: Path, variant: str) -> None:
    r, took = run([build("daemon"), variant], workdir, wall_s=5.0)
    assert r.returncode == 0 and not r.timed_out and took < 3
    pid = int((workdir / "daemon.pid").read_text())
    assert not alive(pid)


def test_huge_allocation_fails(build: Callable[[str], str], workdir: Path) -> None:
    r, took = run([build("bigmem")], workdir, wall_s=5.0, memory_mb=512)
    assert r.returncode != 0 and "allocated" not in r.stdout and took < 3


def test_output_flood_truncated(build: Callable[[str], str], workdir: Path) -> None:
    r, took = run([build("flood")], workdir, wall_s=10.0, output_bytes=4096)
    assert r.returncode == 0 and r.truncated and took < 5
    assert len(r.stdout) < 4200 and f"[... {200 * 2**20 - 4096} bytes truncated ...]" in r.stdout


def test_fork_bomb_contained(build: Callable[[str], str], workdir: Path) -> None:
    r, took = run([build("forkbomb")], workdir, wall_s=1.0, max_procs=64)
    assert r.timed_out and took < 3


def test_thread_bomb_contained(build: Callable[[str], str], workdir: Path) -> None:
    r, took = run([build("threadbomb")], workdir, wall_s=5.0, max_procs=64)
    assert r.returncode == 0 and took < 3
    created = int(r.stdout)
    assert 0 < created < 64 if ROOT else created < 100000  # without root the user's own count is added


def test_fd_exhaustion_contained(build: Callable[[str], str], workdir: Path) -> None:
    r, _ = run([build("fds")], workdir, wall_s=5.0, max_open_files=64)
    assert r.returncode == 0 and 0 < int(r.stdout) <= 64


def test_environment_scrubbed(build: Callable[[str], str], workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-sentinel-" + uuid.uuid4().hex
    monkeypatch.setenv("KERNOPT_TEST_SECRET", secret)
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    for cmd in ([build("environ")], ["env"]):
        r = get_sandbox("local").run(cmd, workdir, Limits(wall_s=5), {"VISIBLE": "yes"})
        assert r.returncode == 0 and secret not in r.stdout and "KERNOPT_TEST_SECRET" not in r.stdout
        lines = set(r.stdout.splitlines())
        assert {"VISIBLE=yes", f"HOME={workdir}", f"TMPDIR={workdir}", "PATH=/usr/local/bin:/usr/bin:/bin"} <= lines


def test_cwd_is_workdir_and_writable(build: Callable[[str], str], workdir: Path) -> None:
    r, _ = run([build("writer"), "out.txt"], workdir, wall_s=5.0)
    assert r.returncode == 0 and r.stdout.splitlines() == [str(workdir), "out.txt ok"]
    assert (workdir / "out.txt").read_text() == "hi"
    if ROOT:  # handed back to the orchestrator, not left writable by the next run's uid
        assert (workdir / "out.txt").stat().st_uid == 0 and workdir.stat().st_uid == 0


@needs_root
def test_cannot_write_outside(build: Callable[[str], str], workdir: Path) -> None:
    outside = [f"/etc/kernopt-sbx-{uuid.uuid4().hex}", f"/root/kernopt-sbx-{uuid.uuid4().hex}", "/usr/bin/true"]
    r, _ = run([build("writer"), *outside], workdir, wall_s=5.0)
    assert r.stdout.splitlines()[1:] == [f"{p} denied" for p in outside]
    assert not any(Path(p).exists() for p in outside[:2])
    assert Path("/usr/bin/true").stat().st_size > 0


@needs_root
def test_shared_tmp_cleaned(build: Callable[[str], str], workdir: Path) -> None:
    leaks = [f"/tmp/kernopt-sbx-leak-{uuid.uuid4().hex}", f"/dev/shm/kernopt-sbx-leak-{uuid.uuid4().hex}"]
    r, _ = run([build("writer"), *leaks], workdir, wall_s=5.0)
    assert r.stdout.splitlines()[1:] == [f"{p} ok" for p in leaks]
    assert not any(Path(p).exists() for p in leaks)


@needs_root
def test_kill_everything_spares_orchestrator_and_other_runs(build: Callable[[str], str], base: Path) -> None:
    # As its private uid, kill(-1) reaches only the run's own processes: not us, not a concurrent run.
    other_dir, killer_dir = base / uuid.uuid4().hex[:8], base / uuid.uuid4().hex[:8]
    other_dir.mkdir(mode=0o755)
    killer_dir.mkdir(mode=0o755)
    results: dict[str, ExecResult] = {}
    t = threading.Thread(target=lambda: results.setdefault("other", run([build("sleeper")], other_dir, False, wall_s=2.0)[0]))
    t.start()
    time.sleep(0.3)
    results["killer"], _ = run([build("killall")], killer_dir, False, wall_s=5.0)
    t.join()
    assert zombie_children() == []
    assert results["killer"].returncode == 0 and results["killer"].stdout.strip() == "0"
    assert results["other"].timed_out  # ran to its wall clock, was not killed by the other run


@needs_root
def test_parallel_fork_bombs_do_not_starve_other_runs(build: Callable[[str], str], base: Path) -> None:
    # RLIMIT_NPROC counts per uid: with one shared sandbox user, the bombs would use up the count.
    def one(prog: list[str], wall_s: float) -> ExecResult:
        d = base / uuid.uuid4().hex[:8]
        d.mkdir(mode=0o755)
        return run(prog, d, False, wall_s=wall_s, max_procs=32)[0]

    forker = ["sh", "-c", "for i in 1 2 3 4 5 6 7 8; do /bin/true & done; wait; echo ok"]
    with ThreadPoolExecutor(4) as pool:
        bombs = [pool.submit(one, [build("forkbomb")], 1.5) for _ in range(3)]
        time.sleep(0.5)
        normal = pool.submit(one, forker, 5.0).result()
        assert all(b.result().timed_out for b in bombs)
    assert normal.returncode == 0 and normal.stdout == "ok\n", normal.stderr
    assert zombie_children() == []


def test_missing_binary(workdir: Path) -> None:
    r = get_sandbox("local").run(["/nonexistent/kernopt-prog"], workdir, Limits(wall_s=5))
    assert r.returncode is None and r.stderr.startswith("cannot start")


@needs_root
def test_unreachable_workdir_refused(tmp_path: Path) -> None:
    os.chmod(tmp_path.parent, 0o700)
    r = get_sandbox("local").run(["/bin/true"], tmp_path, Limits(wall_s=5))
    assert r.returncode is None and "o+x" in r.stderr
    r = get_sandbox("local").run(["/bin/true"], Path("/nonexistent/kernopt-dir"), Limits(wall_s=5))
    assert r.returncode is None and r.stderr.startswith("cannot start")


needs_mpi = pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun missing")


@needs_mpi
@pytest.mark.parametrize("cmd", [["mpirun", "--oversubscribe", "-np", "3", "/bin/true"], ["mpirun", "-np", "2", "hostname"]])
def test_mpirun_runs(workdir: Path, cmd: list[str]) -> None:
    r, _ = run(cmd, workdir, wall_s=30.0)
    assert r.returncode == 0, r.stderr
    assert cmd[-1] != "hostname" or len(r.stdout.split()) == 2


@needs_mpi
def test_mpirun_hung_rank_reaped(build: Callable[[str], str], workdir: Path) -> None:
    # rank 0 exits at once, the others hang: the wall clock ends the job and no rank survives
    script = 'if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then exit 0; fi; exec "$0"'
    r, took = run(["mpirun", "--oversubscribe", "-np", "3", "sh", "-c", script, build("ignoreterm")], workdir, wall_s=2.0)
    assert r.timed_out and took < 4


def test_capture_keeps_head_and_tail() -> None:
    c = _Capture(1024)
    for i in range(10_000):
        c.feed(f"{i:05d}\n".encode())
    text = c.text()
    assert c.truncated and text.startswith("00000\n") and text.endswith("09999\n")
    assert f"[... {60_000 - 1024} bytes truncated ...]" in text and len(c.tail) <= 2048
    small = _Capture(1024)
    small.feed(b"abc")
    assert small.text() == "abc" and not small.truncated
