"""Containment and cleanup of the local sandbox, with real gcc-built hostile programs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kernopt.errors import InfraError
from kernopt.sandbox import ExecResult, Limits, get_sandbox
from kernopt.sandbox.local import MARKER, _Capture
from kernopt.sandbox.tree import TreeBound, remove_tree, walk
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
    # setsid + double fork; the grandchild records its pid (in the sandbox's pid namespace) and becomes
    # `sleep 1000 <argv[2]>` (argv[1]=="noenv": with an empty environment, dropping the marker variable)
    "daemon": """#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
extern char**environ;
int main(int argc,char**argv){
  if(fork()==0){setsid();if(fork()==0){
    FILE*f=fopen("daemon.pid","w");fprintf(f,"%d\\n",getpid());fclose(f);
    char*a[]={"sleep","1000",argv[2],0};char*e[]={0};
    execve("/bin/sleep",a,strcmp(argv[1],"noenv")?environ:e);for(;;)sleep(1000);}
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
    # a chain of argv[1] directories "d/d/d/...", longer than PATH_MAX; every argv[2]-th one left mode 000
    "deepchain": """#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
int main(int argc,char**argv){int n=atoi(argv[1]),every=atoi(argv[2]),i;
for(i=0;i<n;i++)if(mkdir("d",0755)||chdir("d")){perror("mkdir");return 1;}
for(i=n;i>0;i--){if(chdir("..")){perror("chdir");return 1;}if(every&&i%every==0)chmod("d",0);}
printf("%d\\n",n);return 0;}""",
    # argv[1] empty files in many/, until one cannot be created: prints how many and why it stopped
    "manyfiles": """#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
int main(int argc,char**argv){long n=atol(argv[1]),i;char p[64];mkdir("many",0755);
for(i=0;i<n;i++){snprintf(p,sizeof p,"many/%ld",i);int fd=open(p,O_CREAT|O_WRONLY,0644);if(fd<0)break;close(fd);}
printf("%ld %s\\n",i,i<n?strerror(errno):"all");return 0;}""",
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


def cmdline_pids(token: str) -> list[int]:
    """Live processes of the host with `token` among their arguments."""
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            if token in Path(f"/proc/{name}/cmdline").read_bytes().decode(errors="replace").split("\0") and alive(int(name)):
                found.append(int(name))
        except OSError:
            continue
    return found


@pytest.mark.parametrize("variant", ["env", pytest.param("noenv", marks=needs_root)])
def test_double_fork_daemon_dies(build: Callable[[str], str], workdir: Path, variant: str) -> None:
    # The pid the daemon records is its pid in the sandbox's namespace: it is found by its arguments.
    token = f"0.{uuid.uuid4().int % 10**12:012d}"  # a unique duration for sleep (adds nothing measurable)
    r, took = run([build("daemon"), variant, token], workdir, wall_s=5.0)
    assert r.returncode == 0 and not r.timed_out and took < 3
    assert int((workdir / "daemon.pid").read_text()) > 1
    assert cmdline_pids(token) == []


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
    # In its own pid namespace kill(-1) finds nothing else to signal (ESRCH: -1); without one, 0 (every
    # other process refused it). Either way the other run below was not touched.
    assert results["killer"].returncode == 0 and results["killer"].stdout.strip() in ("0", "-1")
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
    # rank 0 exits at once, the others hang: the wall clock ends the job and no rank survives. The program
    # is in the work directory: nothing else of the host is visible in the sandbox but the command's own program.
    shutil.copy(build("ignoreterm"), workdir / "ignoreterm")
    script = 'if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then exit 0; fi; exec "$0"'
    r, took = run(["mpirun", "--oversubscribe", "-np", "3", "sh", "-c", script, "./ignoreterm"], workdir, wall_s=2.0)
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


# ---------------------------------------------------------------- bubblewrap: what a step can see and keep


@pytest.fixture
def sentinel() -> Iterator[Path]:
    """A world-readable file in the host's /tmp with a secret in it."""
    path = Path(f"/tmp/kernopt-sbx-sentinel-{uuid.uuid4().hex}")
    path.write_text(f"sentinel-{uuid.uuid4().hex}\n")
    os.chmod(path, 0o644)
    yield path
    path.unlink()


def test_host_files_invisible(workdir: Path, sentinel: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = f"sk-sentinel-{uuid.uuid4().hex}"
    monkeypatch.setenv("KERNOPT_TEST_SECRET", secret)
    script = (f"cat /etc/passwd; cat {sentinel}; ls -a /root /home /run /work; cat /etc/shadow /etc/hostname; "
              f"cat /proc/1/environ /proc/{os.getpid()}/environ /proc/{os.getppid()}/cmdline; echo; ls /proc | grep -c '^[0-9]'")
    r, _ = run(["sh", "-c", script], workdir, wall_s=10.0)
    assert sentinel.read_text().strip() not in r.stdout and secret not in r.stdout + r.stderr
    names = {ln.split(":")[0] for ln in r.stdout.splitlines() if ln.count(":") == 6}
    assert names == {"root", "kernopt", "nobody"}  # the synthetic passwd: the host's lists daemon, bin, sys, ...
    for gone in (str(sentinel), "/root", "/home", "/run", "/work", "/etc/shadow", "/etc/hostname"):
        assert any(gone in ln and ln.endswith("No such file or directory") for ln in r.stderr.splitlines()), gone
    assert int(r.stdout.split()[-1]) <= 4  # its own pid namespace: bwrap's init, sh, ls, grep


def test_writes_outside_leave_nothing(build: Callable[[str], str], workdir: Path) -> None:
    names = [f"/run/lock/kernopt-sbx-{uuid.uuid4().hex}", f"/tmp/kernopt-sbx-{uuid.uuid4().hex}",
             f"/var/tmp/kernopt-sbx-{uuid.uuid4().hex}", f"/dev/shm/kernopt-sbx-{uuid.uuid4().hex}",
             f"/kernopt-sbx-{uuid.uuid4().hex}", f"/dev/kernopt-sbx-{uuid.uuid4().hex}"]
    r, _ = run([build("writer"), *names], workdir, wall_s=5.0)
    assert r.stdout.splitlines()[1:] == [f"{p} {'ok' if p.split('/')[1] in ('tmp', 'var') or '/shm/' in p else 'denied'}"
                                         for p in names]
    assert not any(Path(p).exists() for p in names)


def test_no_network(workdir: Path) -> None:
    import socket

    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(0.2)
        port = server.getsockname()[1]
        code = (f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=3)\n    print('connected')\n"
                "except OSError as e:\n    print('refused', e)")
        r, _ = run(["python3", "-I", "-c", code], workdir, wall_s=10.0)
        assert r.returncode == 0 and r.stdout.startswith("refused"), r.stdout + r.stderr
        with pytest.raises(TimeoutError):
            server.accept()


@needs_root
@pytest.mark.parametrize("in_place", [False, True], ids=["tmpfs", "in-place"])
@pytest.mark.parametrize("every", [0, 100], ids=["plain", "mode-000"])
def test_deep_tree_bounded(build: Callable[[str], str], workdir: Path, monkeypatch: pytest.MonkeyPatch,
                           in_place: bool, every: int) -> None:
    # 1500 levels: past Python's recursion limit and PATH_MAX. Not kept (deeper than max_depth), no
    # traceback, and what remains is an ordinary directory that shutil.rmtree removes.
    if in_place:  # as where this process may not mount a tmpfs: the directory is lent in place
        monkeypatch.setattr("kernopt.sandbox.local._mount_stage", lambda uid, limits: None)
    (workdir / "input.txt").write_text("in")
    r, _ = run([build("deepchain"), "1500", str(every)], workdir, wall_s=30.0)
    assert r.returncode == 0 and r.stdout.strip() == "1500", r.stderr
    assert "deeper than 64 levels" in r.stderr.splitlines()[-1]
    assert sorted(os.listdir(workdir)) == ([] if in_place else ["input.txt"])  # tmpfs: nothing came back
    shutil.rmtree(workdir)


@needs_root
def test_file_bomb_bounded(build: Callable[[str], str], workdir: Path) -> None:
    # 200k files: the tmpfs runs out of inodes at max_entries (a smaller bound than the default 65536,
    # which behaves the same, keeps this quick); the program sees ENOSPC and kernopt says why.
    r, _ = run([build("manyfiles"), "200000"], workdir, wall_s=30.0, max_entries=5000)
    count, why = r.stdout.split(" ", 1)
    assert r.returncode == 0 and 4900 < int(count) < 5000 and why.strip() == "No space left on device"
    assert r.stderr.strip() == "kernopt: the work directory ran out of inodes (5000 files and directories)"
    assert len(os.listdir(workdir / "many")) == int(count)


@needs_root
def test_work_space_bounded(workdir: Path) -> None:
    r, _ = run(["sh", "-c", "head -c 40000000 /dev/zero > big; echo $?"], workdir, wall_s=10.0, work_mb=16)
    assert r.stdout.strip() != "0" and "No space left on device" in r.stderr
    assert r.stderr.splitlines()[-1] == "kernopt: the work directory ran out of space (16 MiB)"


@needs_root
def test_results_copied_back_as_files(workdir: Path) -> None:
    # What comes back: the step's directories and regular files (owned by us, no setuid, no group/other
    # write); deleted inputs are gone; links and fifos stay behind (a link could name any host file).
    (workdir / "gone.txt").write_text("x")
    (workdir / "sub").mkdir()
    (workdir / "sub" / "kept.txt").write_text("kept")
    script = ("rm gone.txt && echo new > sub/new.txt && chmod 6777 sub/new.txt && ln -s /etc/shadow link && "
              "mkfifo fifo && mkdir -m 000 locked")
    r, _ = run(["sh", "-c", script], workdir, wall_s=10.0)
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(workdir)) == ["locked", "sub"]
    assert sorted(os.listdir(workdir / "sub")) == ["kept.txt", "new.txt"]
    st = (workdir / "sub" / "new.txt").stat()
    assert st.st_uid == 0 and oct(st.st_mode & 0o7777) == oct(0o755)


def test_bwrap_missing_fails_closed(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(workdir))  # no bwrap on the orchestrator's PATH
    r = get_sandbox("local").run(["sh", "-c", f"echo ran > {workdir}/ran"], workdir, Limits(wall_s=5))
    assert r.returncode is None and not (workdir / "ran").exists()
    assert r.stderr == "cannot start: the local sandbox needs bubblewrap (apt-get install bubblewrap): no bwrap on PATH"


def test_bwrap_without_namespaces_fails_closed(workdir: Path, base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A bwrap that cannot create its namespaces here (as in a container without them): its own words, one line.
    fake = base / f"fakebwrap-{uuid.uuid4().hex[:8]}"
    fake.mkdir(mode=0o755)
    (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    os.chmod(fake / "bwrap", 0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    r = get_sandbox("local").run(["sh", "-c", f"echo ran > {workdir}/ran"], workdir, Limits(wall_s=5))
    assert r.returncode is None and not (workdir / "ran").exists()
    assert r.stderr == ("cannot start: the local sandbox needs bubblewrap (apt-get install bubblewrap): "
                        "bwrap: No permissions to create new namespace")


def test_signal_reported_as_negative(workdir: Path) -> None:
    # bwrap's init reports a signal as 128+N; the sandbox gives it back as -N, as for a direct child.
    r, _ = run(["sh", "-c", "kill -SEGV $$"], workdir, wall_s=5.0)
    assert r.returncode == -11


# ---------------------------------------------------------------- tree.py


def deep_chain(top: Path, levels: int, every: int = 0) -> None:
    """levels nested directories d/d/..., each with a file and a symlink to a host file; every
    `every`-th left mode 000. Built through directory fds: the path is far past PATH_MAX."""
    fd = os.open(top, os.O_RDONLY)
    fds = [fd]
    for _ in range(levels):
        os.mkdir("d", dir_fd=fds[-1])
        fds.append(os.open("d", os.O_RDONLY, dir_fd=fds[-1]))
        os.close(os.open("f", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fds[-1]))
        os.symlink("/etc/hostname", "link", dir_fd=fds[-1])
    for i, fd in enumerate(fds):
        if every and i and i % every == 0:
            os.fchmod(fd, 0)
        os.close(fd)


def test_remove_tree_any_depth(base: Path) -> None:
    top = base / f"deep-{uuid.uuid4().hex[:8]}"
    top.mkdir()
    deep_chain(top, 1500, every=100)
    os.chmod(top, 0)
    before = Path("/etc/hostname").stat() if Path("/etc/hostname").exists() else None
    remove_tree(top)
    assert not top.exists()
    if before is not None:  # the links were removed, never followed
        assert Path("/etc/hostname").stat().st_mode == before.st_mode
    remove_tree(top)  # a missing tree is fine
    with pytest.raises(TreeBound):
        top.mkdir()
        deep_chain(top, 100)
        walk(top, lambda fd, name, st: True, max_depth=64)
    remove_tree(top)


def test_remove_tree_reports_infra_error() -> None:
    with pytest.raises(InfraError):
        remove_tree(Path("/proc/self/fdinfo"))  # the kernel's: nothing in it can be removed


@needs_root
def test_unprivileged_orchestrator(base: Path) -> None:
    # An orchestrator that is not root: no uid switch and no tmpfs, but the same bwrap confinement, and
    # the work directory is walked after the step (a tree past the bounds is removed, with one line).
    repo = Path(__file__).resolve().parents[1]
    if not all(p.stat().st_mode & 0o001 for p in [repo, *repo.parents]) or shutil.which("setpriv") is None:
        pytest.skip("the repository is not reachable by another user")
    work = base / f"user-{uuid.uuid4().hex[:8]}"
    work.mkdir(mode=0o755)
    os.chown(work, 65534, 65534)
    code = f"""
import sys
sys.path.insert(0, {str(repo)!r})
from pathlib import Path
from kernopt.sandbox import Limits, get_sandbox
sb, work = get_sandbox("local"), Path({str(work)!r})
r = sb.run(["sh", "-c", "id -u; cut -d: -f1 /etc/passwd | tr '\\\\n' ' '; echo; ls /proc | grep -c '^[0-9]'"], work, Limits(wall_s=10))
print(r.stdout, end="")
r = sb.run(["sh", "-c", "i=0; while [ $i -lt 100 ]; do mkdir d && cd d || exit 1; i=$((i+1)); done"], work, Limits(wall_s=10))
print(r.returncode, r.stderr.splitlines()[-1])
"""
    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-I", "-c", code],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "65534" and lines[1].split() == ["root", "kernopt", "nobody"] and int(lines[2]) <= 4
    assert lines[3] == "0 kernopt: the work directory held directories nested deeper than 64 levels: everything in it was removed"
    assert os.listdir(work) == []
