"""The Ray executor on a real two-node Ray cluster on this machine (a head and a worker node, each
started with `ray start --block` in a private --temp-dir, stopped by their own pids at the end).

Skipped when Ray is not importable, unless KERNOPT_REQUIRE_RAY=1 (CI: .ci/run), where that is a failure."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kernopt.bench.ray_executor import OWNER_FILE, _sweep_stale, placed, unplaceable
from kernopt.bench.transfer import _recover, install_run_dir, pack
from kernopt.bench.work import Resources, WorkItem
from kernopt.config import RunConfig
from tests.conftest import REPO, needs

if importlib.util.find_spec("ray") is None:
    if os.environ.get("KERNOPT_REQUIRE_RAY") == "1":  # CI (.ci/run): these tests must run, not skip
        raise RuntimeError("tests/test_bench_ray.py cannot run: Ray is not importable (pip install -e '.[ray]')")
    pytest.skip("needs Ray (pip install -e '.[ray]'); KERNOPT_REQUIRE_RAY=1 turns this skip into a failure", allow_module_level=True)

DATA = REPO / "tests" / "data"
TASKS = [DATA / "small_gemm", DATA / "small_reduction"]
# 3 timing rounds: nothing can be significant (the rank test needs 5), so the outcome of a run is
# decided by verification alone and the same bench through two executors must agree exactly.
QUICK = ["--sandbox", "local", "--set", "eval.rounds=3", "--set", "eval.race_check=false"]
TEST_HW = "kernopt_test_hw"  # a custom resource only the worker node has


@dataclass
class Cluster:
    address: str
    head: str  # node ids
    worker: str
    env: dict[str, str]  # for kernopt commands: the cluster's private host lock


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ray_cli() -> str:
    beside = Path(sys.executable).parent / "ray"
    return str(beside) if beside.exists() else (shutil.which("ray") or "ray")


def _start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """`ray start --block ...`; returns once it says the node runs (or fails with its log)."""
    with open(log, "wb") as out:
        proc = subprocess.Popen([_ray_cli(), "start", "--block", "--disable-usage-stats", "--object-store-memory=80000000", *args],
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if b"Ray runtime started" in log.read_bytes():
            return proc
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    _stop(proc)
    pytest.fail(f"ray start did not come up: {log.read_text(errors='replace')[-2000:]}")


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            ppid = int(Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to our `ray start --block` (it stops its node's processes); SIGKILL to what is left of its tree."""
    tree = _descendants(proc.pid)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for pid in tree:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    # Ray puts unix sockets under --temp-dir; their paths must stay short, so not pytest's tmp_path
    tmp = Path(tempfile.mkdtemp(prefix="kray-", dir="/tmp"))
    port = _free_port()
    address = f"127.0.0.1:{port}"
    # The host-wide timing lock of this cluster's nodes and of the commands here is a private one: the
    # same lock for both nodes (one machine), but no waiting on other kernopt work on this machine.
    env = {**os.environ, "KERNOPT_HOST_LOCK": str(tmp / "host.lock")}
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(_start(["--head", "--node-ip-address=127.0.0.1", f"--port={port}", "--num-cpus=2", "--include-dashboard=false",
                             f"--temp-dir={tmp}", f"--ray-client-server-port={_free_port()}",
                             f"--dashboard-agent-listen-port={_free_port()}"], tmp / "head.log", env))
        procs.append(_start([f"--address={address}", "--node-ip-address=127.0.0.1", "--num-cpus=2",
                             f"--resources={json.dumps({TEST_HW: 1})}", f"--dashboard-agent-listen-port={_free_port()}"],
                            tmp / "worker.log", env))
        probe = subprocess.run([sys.executable, "-c", f"""
import json, logging, time, ray
ray.init(address={address!r}, logging_level=logging.ERROR, log_to_driver=False)
for _ in range(240):
    nodes = [n for n in ray.nodes() if n["Alive"]]
    if len(nodes) == 2:
        break
    time.sleep(0.25)
print(json.dumps([[n["NodeID"], n["Resources"]] for n in nodes]))
"""], capture_output=True, text=True, timeout=120)
        assert probe.returncode == 0, probe.stderr[-2000:]
        nodes = json.loads(probe.stdout.strip().splitlines()[-1])
        assert len(nodes) == 2, f"the worker node did not join: {nodes}"
        worker = next(nid for nid, res in nodes if TEST_HW in res)
        head = next(nid for nid, _ in nodes if nid != worker)
        yield Cluster(address=address, head=head, worker=worker, env=env)
    finally:
        for proc in reversed(procs):  # the worker node first: it deregisters from a live head
            _stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)


def kernopt(*args: str, env: dict[str, str] | None = None, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kernopt", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)


def results(bench: Path) -> dict[str, dict]:
    """The latest WorkResult per key from the bench's commit log."""
    out = {}
    for line in (bench / "results.jsonl").read_text().splitlines():
        r = json.loads(line)
        out[r["key"]] = r
    return out


def eval_ids(run_dir: Path) -> list[str]:
    return [json.loads(ln)["result"]["candidate_id"] for ln in (run_dir / "events.jsonl").read_text().splitlines()
            if ln.startswith("{") and json.loads(ln)["type"] == "eval"]


# ---------------------------------------------------------------- on the cluster
@needs("gcc")
def test_bench_on_two_nodes_matches_local(cluster: Cluster, tmp_path: Path) -> None:
    tasks = [str(t) for t in TASKS]
    p = kernopt("bench", *tasks, "--executor", "ray", "--address", cluster.address, "--jobs", "2", "--budget", "2", *QUICK,
                "--benches-dir", str(tmp_path), "--name", "onray", "--json", env=cluster.env)
    assert p.returncode == 0, p.stderr[-3000:]
    on_ray = json.loads(p.stdout)
    q = kernopt("bench", *tasks, "--executor", "local", "--jobs", "2", "--budget", "2", *QUICK,
                "--benches-dir", str(tmp_path), "--name", "local", "--json", env=cluster.env)
    assert q.returncode == 0, q.stderr[-3000:]
    local = json.loads(q.stdout)

    def rows(summary: dict) -> dict[str, tuple]:
        return {r["key"]: (r["status"], r["candidates"], r["verified_candidates"]) for r in summary["tasks"]}

    assert set(rows(on_ray)) == {"small_gemm", "small_reduction"}
    assert rows(on_ray) == rows(local)
    bench = tmp_path / "onray"
    got, ref = results(bench), results(tmp_path / "local")
    assert {k: r["status"] for k, r in got.items()} == {k: r["status"] for k, r in ref.items()} == dict.fromkeys(got, "finished")
    for key, r in got.items():
        run_dir = bench / "runs" / key.replace("/", "__")
        assert r["run_dir"] == str(run_dir.resolve())
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["status"] == "finished" and summary["run_dir"] == str(run_dir.resolve())
        # the same candidates with the same verdicts as the local run: the search did not change with the executor
        local_run = tmp_path / "local" / "runs" / key.replace("/", "__")
        assert eval_ids(run_dir) == eval_ids(local_run)
        assert summary["statuses"] == json.loads((local_run / "summary.json").read_text())["statuses"]
        # the run directory names this machine's paths, not the node's temporary ones
        config = json.loads((run_dir / "config.json").read_text())
        assert config["task"] == str((DATA / key).resolve()) and config["runs_dir"] == str(run_dir.resolve().parent)
    assert not [p for p in (bench / "runs").iterdir() if p.name.startswith(".")], "an unpacked archive was left behind"
    # each item ran on its own node: each asks for 2 CPUs and each node has 2
    nodes = {r["host"].rsplit("/", 1)[1] for r in got.values()}
    assert nodes == {cluster.head[:8], cluster.worker[:8]}, (nodes, cluster)


@needs("gcc")
def test_timeout_sends_the_run_back_and_the_bench_resumes_it(cluster: Cluster, tmp_path: Path) -> None:
    args = ["bench", str(TASKS[0]), "--executor", "ray", "--address", cluster.address, "--budget", "8", *QUICK,
            "--benches-dir", str(tmp_path), "--name", "t", "--json"]
    p = kernopt(*args, "--task-timeout", "5", env=cluster.env)
    assert p.returncode == 1, p.stderr[-3000:]
    r = results(tmp_path / "t")["small_gemm"]
    assert r["status"] == "timeout" and "timeout" in r["error"], r
    run_dir = tmp_path / "t" / "runs" / "small_gemm"
    assert (run_dir / "config.json").is_file(), "the half-finished run directory did not come back"
    assert not (run_dir / "summary.json").exists()
    before = eval_ids(run_dir)

    q = kernopt(*args, env=cluster.env)
    assert q.returncode == 0, q.stderr[-3000:]
    assert results(tmp_path / "t")["small_gemm"]["status"] == "finished"
    after = eval_ids(run_dir)
    assert after[: len(before)] == before and len(after) == len(set(after)) == 8
    # the run came back as it was, and was resumed on a node from the log (not started afresh)
    types = [json.loads(ln)["type"] for ln in (run_dir / "events.jsonl").read_text().splitlines() if ln.startswith("{")]
    assert types[0] == "start" and types.count("start") == 1 and "resume" in types and types[-1] == "end"


def _workers_of(cluster: Cluster) -> list[int]:
    """kernopt worker processes started for this cluster's tasks (they carry its private lock in their environment)."""
    mine = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{name}/cmdline").read_bytes()
            env = Path(f"/proc/{name}/environ").read_bytes()
        except OSError:
            continue
        if b"kernopt.bench.worker" in cmd and cluster.env["KERNOPT_HOST_LOCK"].encode() in env:
            mine.append(int(name))
    return mine


def _runs_evaluating(cluster: Cluster) -> int:
    """How many of this cluster's workers have a run on their node that logged at least one evaluation."""
    workers = set()  # the Ray worker processes that unpacked the items: the parents of the kernopt workers
    for pid in _workers_of(cluster):
        try:
            workers.add(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError):
            continue
    n = 0
    for tmp in Path(tempfile.gettempdir()).glob("kernopt-ray-*"):
        try:
            if (tmp / OWNER_FILE).read_text().strip() not in workers:
                continue
            n += any('"type": "eval"' in f.read_text() for f in tmp.glob("runs/*/events.jsonl"))
        except OSError:
            continue
    return n


@needs("gcc")
def test_interrupt_sends_the_runs_back(cluster: Cluster, tmp_path: Path) -> None:
    bench = tmp_path / "i"
    proc = subprocess.Popen([sys.executable, "-m", "kernopt", "bench", *map(str, TASKS), "--executor", "ray", "--address", cluster.address,
                             "--jobs", "2", "--budget", "50", *QUICK, "--set", "eval.rounds=15", "--benches-dir", str(tmp_path), "--name", "i"],
                            cwd=REPO, env=cluster.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # a shell's background job ignores it
    # interrupt once both runs have logged an evaluation on their nodes, not after a fixed sleep: a small_gemm run
    # at 3 rounds ends in about 10 s, and on a loaded CI machine a fixed sleep once let one finish first
    deadline = time.monotonic() + 180
    while _runs_evaluating(cluster) < 2 and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        time.sleep(0.2)
    assert _runs_evaluating(cluster) == 2, "the two runs did not start evaluating within 180 s"
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr[-3000:]
    for key in ("small_gemm", "small_reduction"):
        run_dir = bench / "runs" / key
        assert (run_dir / "config.json").is_file(), f"{key}: the half-finished run did not come back"
        assert not (run_dir / "summary.json").exists()
    deadline = time.monotonic() + 30
    while _workers_of(cluster) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _workers_of(cluster), "a worker outlived the interrupted bench"


@needs("gcc")
def test_hardware_resource_places_items(cluster: Cluster, tmp_path: Path) -> None:
    task = str(TASKS[1])
    p = kernopt("bench", task, "--executor", "ray", "--address", cluster.address, "--hardware", TEST_HW, "--budget", "1", *QUICK,
                "--benches-dir", str(tmp_path), "--name", "hw", "--json", env=cluster.env)
    assert p.returncode == 0, p.stderr[-3000:]
    r = results(tmp_path / "hw")["small_reduction"]
    assert r["status"] == "finished" and r["host"].endswith("/" + cluster.worker[:8]), (r, cluster)

    # a resource no node has: failed at once with the reason, not queued forever
    started = time.monotonic()
    q = kernopt("bench", task, "--executor", "ray", "--address", cluster.address, "--hardware", "no_such_gpu", "--budget", "1",
                *QUICK, "--benches-dir", str(tmp_path), "--name", "nohw", "--json", env=cluster.env, timeout=120)
    assert q.returncode == 1, q.stderr[-3000:]
    assert time.monotonic() - started < 60
    r = results(tmp_path / "nohw")["small_reduction"]
    assert r["status"] == "failed" and "no node of the Ray cluster can run it" in r["error"] and "no_such_gpu" in r["error"], r


def test_no_cluster_is_one_line(tmp_path: Path) -> None:
    """Ray itself retries an address where no cluster is for minutes; kernopt says so in one line at once."""
    def bench(*extra: str, env: dict[str, str] | None = None) -> str:
        p = kernopt("bench", str(TASKS[0]), "--executor", "ray", "--sandbox", "local", "--benches-dir", str(tmp_path), *extra,
                    env=env, timeout=60)
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        assert p.returncode == 2 and len(lines) == 1, p.stderr[-3000:]
        return lines[0]

    assert "no Ray cluster answers at 127.0.0.1:" in bench("--address", f"127.0.0.1:{_free_port()}")
    assert "(RAY_ADDRESS: " in bench(env={**os.environ, "RAY_ADDRESS": f"127.0.0.1:{_free_port()}"})
    with socket.socket() as silent:  # something listens there, but it is not Ray
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        assert "not as a Ray cluster" in bench("--address", f"127.0.0.1:{silent.getsockname()[1]}")
    assert not (tmp_path / "small_gemm-tuner").exists()


# ---------------------------------------------------------------- the pieces, without a cluster
def test_nothing_else_imports_ray() -> None:
    code = ("import sys, kernopt.cli, kernopt.bench.local, kernopt.bench.runner, kernopt.bench.worker, kernopt.bench.ray_executor; "
            "sys.exit('ray' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO, timeout=120).returncode == 0


def _item(tmp_path: Path, **resources: object) -> WorkItem:
    config = RunConfig(task=str(TASKS[0]), runs_dir=tmp_path / "runs")
    return WorkItem(key="data/small_gemm", config=config, run_dir=str(tmp_path / "runs" / "data__small_gemm"),
                    resources=Resources(**resources))  # type: ignore[arg-type]


def test_unplaceable() -> None:
    nodes = [{"id": "a", "resources": {"CPU": 2.0, "memory": 1e9}}, {"id": "b", "resources": {"CPU": 4.0, "h100": 8.0, "GPU": 8.0}}]
    item = _item(Path("/nonexistent"))
    assert unplaceable(item, nodes, 0.001) == ""
    assert unplaceable(_item(Path("/x"), cpus=4, hardware="h100", gpus=1), nodes, 0.001) == ""
    why = unplaceable(_item(Path("/x"), cpus=4, hardware="a100"), nodes, 0.001)
    assert "'a100'" in why and "2 CPU" in why and "8 h100" in why and "memory" not in why
    assert "8 CPU" in unplaceable(_item(Path("/x"), cpus=8), nodes, 0.001)
    assert "no alive node" in unplaceable(item, [], 0.001)
    # --hardware fills in items naming none; on a cluster without GPUs a GPU task asks for none (it runs untimed)
    gpu_item = _item(Path("/x"), gpus=1, hardware="h100")
    assert placed(item, "a100", no_gpus=False).resources.hardware == "a100"
    assert placed(gpu_item, "a100", no_gpus=False).resources == gpu_item.resources
    assert placed(gpu_item, None, no_gpus=True).resources.gpus == 0


def test_install_run_dir_swaps_and_points_home(tmp_path: Path) -> None:
    item = _item(tmp_path)
    target = Path(item.run_dir)
    target.mkdir(parents=True)
    (target / "old.txt").write_text("old")
    node = tmp_path / "node" / "runs" / "small_gemm"
    node.mkdir(parents=True)
    (node / "config.json").write_text(json.dumps({"task": "/tmp/kernopt-ray-x/task/small_gemm", "runs_dir": str(node.parent),
                                                  "search": {"value_path": None}}))
    (node / "summary.json").write_text(json.dumps({"status": "finished", "run_dir": str(node)}))
    (node / "candidates").mkdir()
    install_run_dir(pack(node), item)
    assert not (target / "old.txt").exists()
    assert json.loads((target / "config.json").read_text())["task"] == str(TASKS[0].resolve())
    assert json.loads((target / "config.json").read_text())["runs_dir"] == str(target.parent)
    assert json.loads((target / "summary.json").read_text())["run_dir"] == str(target)
    assert sorted(p.name for p in target.parent.iterdir()) == ["data__small_gemm"]

    # what a driver killed mid-swap leaves: a half-unpacked copy goes, a set-aside run directory comes back
    (target.parent / ".data__small_gemm.incoming-1").mkdir()
    target.rename(target.parent / ".data__small_gemm.old-2")
    _recover(target)
    assert (target / "config.json").is_file() and sorted(p.name for p in target.parent.iterdir()) == ["data__small_gemm"]


@pytest.mark.parametrize("builtin_filter", [True, False], ids=["tarfile-data-filter", "by-hand"])
def test_unpack_refuses_paths_out_of_the_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, builtin_filter: bool) -> None:
    """Both ways: tarfile's data filter (Python >= 3.11.4) and the checks by hand (Debian 12's 3.11.2)."""
    import io
    import tarfile

    from kernopt.bench.transfer import pack, unpack

    if not builtin_filter:
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    elif not hasattr(tarfile, "data_filter"):
        pytest.skip("this Python's tarfile has no data filter")

    def archive(info: tarfile.TarInfo, data: bytes = b"") -> bytes:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        return buf.getvalue()

    link = tarfile.TarInfo("out")
    link.type, link.linkname = tarfile.SYMTYPE, "../../etc"
    fifo = tarfile.TarInfo("pipe")
    fifo.type = tarfile.FIFOTYPE
    for bad in (archive(tarfile.TarInfo("../escaped.txt"), b"x"), archive(link), archive(fifo)):
        with pytest.raises(tarfile.TarError):
            unpack(bad, tmp_path / "in")
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "in" / "out").exists()
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "a.txt").write_text("fine")
    unpack(pack(src), tmp_path / "ok")
    assert (tmp_path / "ok" / "sub" / "a.txt").read_text() == "fine"


def test_sweep_removes_only_dead_tasks_leftovers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.Popen(["true"])
    dead.wait()
    for name, owner in (("kernopt-ray-dead", str(dead.pid)), ("kernopt-ray-live", str(os.getpid())), ("kernopt-ray-new", None)):
        (tmp_path / name).mkdir()
        if owner is not None:
            (tmp_path / name / OWNER_FILE).write_text(owner)
    _sweep_stale()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kernopt-ray-live", "kernopt-ray-new"]
