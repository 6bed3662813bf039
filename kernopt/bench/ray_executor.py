"""The Ray executor: each work item is a Ray task, placed by the resources it asks for.

    RayExecutor(*, address: str | None = None, hardware: str | None = None,
                hardware_amount: float = 0.001, jobs: int | None = None, cancel_grace_s: float = 120.0)

`address`: the cluster, `host:port` of its head (or `ray://host:port` for Ray Client). None means
`RAY_ADDRESS`, else the cluster `ray start` left on this machine (Ray's "auto"); it never starts a
private cluster: with no cluster answering, the constructor raises a one-line UserError. `hardware`:
the custom resource for items that name none; `hardware_amount`: how much of it one item takes (a
token amount by default, so the resource says *where* an item may run and the CPU request says how
many run there at once). `jobs`: at most this many items submitted at once (None: all, Ray queues them
by resources).

Each item becomes one Ray task with `num_cpus=resources.cpus`, `num_gpus=resources.gpus` and
`resources={hardware: hardware_amount}` (on a cluster without any GPU, GPU tasks ask for none and run
untimed, as the local executor runs them on a machine without one), `scheduling_strategy="SPREAD"`
(timings are less disturbed on separate machines) and no retries (a crashed item is reported, and the
next run of the bench resumes it). Before anything is submitted, every item is checked against the nodes alive now: an
item that no node could run (too many CPUs or GPUs, a resource no node has) gets `failed` at once
with a one-line reason instead of waiting forever in Ray's queue.

Nodes need not share a filesystem. The task directory (symlinks followed), a half-finished run
directory and a learned value model travel with the task as tar.gz bytes. On the node the task unpacks
them into a temporary directory, rewrites the item's paths, and runs the item in a worker process of its
own (`python -m kernopt.bench.worker`, which calls `run_work_item`), forwarding its ProgressEvents
through a `ray.util.queue.Queue` the driver drains. A worker past `timeout_s` gets SIGTERM (its process
group; SIGKILL after a grace period) and the item `timeout`, with its half-finished run directory sent
back, so the next run of the bench resumes it. The run directory comes back as one archive: the
driver unpacks it next to `item.run_dir`, puts the driver's paths back into config.json and
summary.json, and swaps it in (renameat2 RENAME_EXCHANGE where the filesystem has it), so a killed
driver leaves either the old run directory or the new one, never a half-unpacked one.

Hosts: WorkResult.host and ProgressEvent.host read `<hostname>/<ray node id prefix>`, so two Ray
nodes on one machine are told apart.

Failures: a task that raises (unpacking, a kernopt version other than the driver's) is `failed`; a
Ray worker or node that dies is `crashed`; a task that outlives its item's timeout by
`cancel_grace_s` (a node that stopped answering) is cancelled (`ray.cancel(force=True)`) and `timeout`.
Ctrl-C (KeyboardInterrupt in `run`) tells the running tasks to stop their workers and waits up to 30 s
for their run directories; a killed driver loses only the progress of the items in flight (Ray ends
the job's tasks, and each worker dies with its task: PR_SET_PDEATHSIG; the next task on that node
removes the temporary directories they left). Before connecting, the address
is asked whether it speaks gRPC (Ray retries a wrong address for minutes, deaf to Ctrl-C). Ray's logs
stay in the cluster's log files (`log_to_driver=False`, logging level ERROR).
"""

from __future__ import annotations

import contextlib
import logging
import os
import platform
import shutil
import signal
import socket
import tarfile
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kernopt import __version__
from kernopt.bench import worker
from kernopt.bench.transfer import _point_run_dir, _recover, install_run_dir, pack, unpack
from kernopt.bench.work import OnEvent, OnResult, ProgressEvent, WorkItem, WorkResult, one_line
from kernopt.bench.worker import KILL_GRACE_S
from kernopt.errors import UserError

CANCEL_GRACE_S = 120.0  # on the driver: how long past its timeout a task may take to come back before it is cancelled
POLL_S = 0.25
_IGNORED_RESOURCES = ("memory", "object_store_memory")


@dataclass
class _Flight:
    item: WorkItem
    submitted: float
    started: float | None = None
    host: str = ""


class RayExecutor:
    """Runs items as Ray tasks on a running cluster. See the module docstring."""

    name = "ray"

    def __init__(self, *, address: str | None = None, hardware: str | None = None, hardware_amount: float = 0.001,
                 jobs: int | None = None, cancel_grace_s: float = CANCEL_GRACE_S) -> None:
        if hardware_amount <= 0:
            raise UserError(f"hardware_amount must be positive (got {hardware_amount})")
        if jobs is not None and jobs < 1:
            raise UserError(f"jobs must be at least 1 (got {jobs})")
        try:
            import ray
        except ImportError:
            raise UserError("the ray executor needs Ray: pip install 'kernopt[ray]'") from None
        self._ray = ray
        self.address = address
        self.hardware = hardware
        self.hardware_amount = hardware_amount
        self.jobs = jobs
        self.cancel_grace_s = cancel_grace_s
        self._owns_connection = False
        self._connect()
        self._remote = ray.remote(_work)

    # ------------------------------------------------------------ connection
    def _connect(self) -> None:
        ray = self._ray
        if ray.is_initialized():
            return
        env = os.environ.get("RAY_ADDRESS")
        where = self.address or (f"{env} (RAY_ADDRESS)" if env else "this machine (no --address, no RAY_ADDRESS)")
        missing = UserError(f"no Ray cluster answers at {where}: start one with `ray start --head` "
                            "(and `ray start --address HEAD:PORT` on each worker node), then pass --address HEAD:PORT")
        target = self.address or _discover()
        if target is None:
            raise missing
        if target != "auto":
            source = "--address" if self.address else "RAY_ADDRESS" if env else "found on this machine"
            _probe(target, source)  # Ray itself retries a dead address for minutes, deaf to Ctrl-C
        try:
            ray.init(address=target, logging_level=logging.ERROR, log_to_driver=False, namespace="kernopt")
        except ConnectionError:
            raise missing from None
        except (ValueError, RuntimeError) as e:
            raise UserError(f"cannot connect to the Ray cluster at {where}: {one_line(str(e), 200)}") from None
        self._owns_connection = True

    def close(self) -> None:
        if self._owns_connection and self._ray.is_initialized():
            self._ray.shutdown()
        self._owns_connection = False

    def nodes(self) -> list[dict[str, Any]]:
        """The alive nodes: {"id", "resources"} each."""
        return [{"id": n["NodeID"], "resources": dict(n.get("Resources") or {})} for n in self._ray.nodes() if n.get("Alive")]

    # ------------------------------------------------------------ running
    def run(self, items: Iterable[WorkItem], on_event: OnEvent, on_result: OnResult) -> None:
        from ray.util.queue import Queue

        ray = self._ray
        nodes = self.nodes()
        # As the local executor on a machine without GPUs: on a cluster without any, GPU tasks run without one (untimed)
        no_gpus = not any(n["resources"].get("GPU", 0) for n in nodes)
        items = [placed(item, self.hardware, no_gpus) for item in items]
        pending: deque[WorkItem] = deque()
        for item in items:
            _recover(Path(item.run_dir))
            why = unplaceable(item, nodes, self.hardware_amount)
            if why:
                on_result(WorkResult(key=item.key, status="failed", run_dir=item.run_dir, error=why))
            else:
                pending.append(item)
        if not pending:
            return
        events = Queue(actor_options={"num_cpus": 0})
        control = ray.remote(_Control).options(num_cpus=0).remote()
        inflight: dict[Any, _Flight] = {}
        try:
            while pending or inflight:
                while pending and (self.jobs is None or len(inflight) < self.jobs):
                    item = pending.popleft()
                    try:
                        ref = self._submit(item, events, control)
                    except (OSError, tarfile.TarError, UserError) as e:
                        on_result(WorkResult(key=item.key, status="failed", run_dir=item.run_dir,
                                             error=one_line(f"cannot pack the task for Ray: {e}")))
                        continue
                    inflight[ref] = _Flight(item=item, submitted=time.monotonic())
                if not inflight:
                    continue
                ready, _ = ray.wait(list(inflight), num_returns=1, timeout=POLL_S)
                self._drain(events, inflight, on_event)
                for ref in ready:
                    on_result(self._collect(ref, inflight.pop(ref)))
                self._cancel_overdue(inflight, on_result)
        except KeyboardInterrupt:
            self._bring_back(inflight, events, control)
            raise
        finally:
            for ref in inflight:
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
            with contextlib.suppress(Exception):
                events.shutdown(force=True)
            with contextlib.suppress(Exception):
                ray.kill(control)

    def _bring_back(self, inflight: dict[Any, _Flight], events: Any, control: Any) -> None:
        """Interrupted: ask the running tasks to stop their workers and send their run directories back,
        so the next run of the bench resumes them; give up on them after a grace period (or a second Ctrl-C).
        Tasks still waiting in Ray's queue are cancelled at once."""
        ray = self._ray
        try:
            control.stop.remote()
            self._drain(events, inflight, lambda event: None)
            for ref, flight in list(inflight.items()):
                if flight.started is None:
                    with contextlib.suppress(Exception):
                        ray.cancel(ref)
                    inflight.pop(ref)
            deadline = time.monotonic() + KILL_GRACE_S + 20
            while inflight and time.monotonic() < deadline:
                ready, _ = ray.wait(list(inflight), num_returns=1, timeout=POLL_S)
                for ref in ready:
                    self._collect(ref, inflight.pop(ref))  # installs the run directory; nobody takes the result now
        except KeyboardInterrupt:
            pass

    def _submit(self, item: WorkItem, events: Any, control: Any) -> Any:
        task_dir = Path(item.config.task)
        if not task_dir.is_dir():
            raise UserError(f"{task_dir}: no such task directory")
        run_dir = Path(item.run_dir)
        value = item.config.search.value_path
        bundle = {
            "item": item.model_dump_json(),
            "version": __version__,
            "task_name": task_dir.resolve().name,
            "task": pack(task_dir, dereference=True),
            "run": pack(run_dir) if run_dir.is_dir() else None,
            "value": (Path(value).name, Path(value).read_bytes()) if value is not None and Path(value).is_file() else None,
        }
        options: dict[str, Any] = {"num_cpus": item.resources.cpus, "num_gpus": item.resources.gpus,
                                   "max_retries": 0, "scheduling_strategy": "SPREAD", "name": f"kernopt:{item.key}"}
        if item.resources.hardware:
            options["resources"] = {item.resources.hardware: self.hardware_amount}
        return self._remote.options(**options).remote(bundle, events, control)

    def _drain(self, events: Any, inflight: dict[Any, _Flight], on_event: OnEvent) -> None:
        try:
            n = events.qsize()
            batch = events.get_nowait_batch(n) if n else []
        except Exception:  # the queue actor is gone (its node died): no more events, results still arrive
            return
        by_key = {f.item.key: f for f in inflight.values()}
        for kind, key, payload in batch:
            flight = by_key.get(key)
            if flight is None:
                continue  # late news about an item that already has its result
            if kind == "start":
                flight.started, flight.host = time.monotonic(), payload
            elif kind == "event":
                with contextlib.suppress(ValidationError, ValueError):
                    on_event(ProgressEvent.model_validate_json(payload))

    def _collect(self, ref: Any, flight: _Flight) -> WorkResult:
        ray, item = self._ray, flight.item
        elapsed = round(time.monotonic() - (flight.started or flight.submitted), 1)

        def fail(status: Any, error: str) -> WorkResult:
            return WorkResult(key=item.key, status=status, run_dir=item.run_dir, error=one_line(error), elapsed_s=elapsed, host=flight.host)

        try:
            out = ray.get(ref)
        except ray.exceptions.RayTaskError as e:  # the task's own code raised (unpacking, a bug)
            cause = e.cause if isinstance(getattr(e, "cause", None), BaseException) else e
            return fail("failed", f"the Ray task raised {type(cause).__name__}: {cause}")
        except ray.exceptions.RayError as e:  # the worker or its node died, ran out of memory, the object was lost
            what = one_line(str(e), 200)
            return fail("crashed", f"the Ray worker died ({type(e).__name__}): {what}")
        try:
            result = WorkResult.model_validate_json(out["result"])
        except (ValidationError, ValueError, KeyError, TypeError) as e:
            return fail("failed", f"the Ray task returned no result: {e}")
        if out.get("archive") is not None:
            try:
                install_run_dir(out["archive"], item)
            except (OSError, tarfile.TarError, ValueError) as e:
                return fail("failed", f"the run directory from {result.host} could not be unpacked into {item.run_dir}: {e}")
        summary = dict(result.summary, run_dir=item.run_dir) if result.summary is not None else None
        return result.model_copy(update={"run_dir": item.run_dir, "summary": summary})

    def _cancel_overdue(self, inflight: dict[Any, _Flight], on_result: OnResult) -> None:
        now = time.monotonic()
        for ref, flight in list(inflight.items()):
            t = flight.item.timeout_s
            if t is None or flight.started is None or now < flight.started + t + self.cancel_grace_s:
                continue
            with contextlib.suppress(Exception):
                self._ray.cancel(ref, force=True)
            inflight.pop(ref)
            on_result(WorkResult(key=flight.item.key, status="timeout", run_dir=flight.item.run_dir, host=flight.host,
                                 elapsed_s=round(now - flight.started, 1),
                                 error=f"no answer from the Ray node {flight.host or '?'} {t + self.cancel_grace_s:g}s after the "
                                       "item started; cancelled (its progress stayed on the node)"))


# ---------------------------------------------------------------- placement
def placed(item: WorkItem, hardware: str | None, no_gpus: bool) -> WorkItem:
    """The item with `hardware` when it names none, and without a GPU request on a cluster without GPUs."""
    update: dict[str, Any] = {}
    if hardware and not item.resources.hardware:
        update["hardware"] = hardware
    if no_gpus and item.resources.gpus:
        update["gpus"] = 0.0
    return item.model_copy(update={"resources": item.resources.model_copy(update=update)}) if update else item


def _need(item: WorkItem, hardware_amount: float) -> dict[str, float]:
    need = {"CPU": item.resources.cpus}
    if item.resources.gpus > 0:
        need["GPU"] = item.resources.gpus
    if item.resources.hardware:
        need[item.resources.hardware] = hardware_amount
    return need


def unplaceable(item: WorkItem, nodes: list[dict[str, Any]], hardware_amount: float) -> str:
    """Why no node of the cluster could run the item ("" when one could)."""
    need = _need(item, hardware_amount)
    for node in nodes:
        if all(node["resources"].get(k, 0.0) >= v - 1e-9 for k, v in need.items()):
            return ""
    want = ", ".join(f"{v:g} {k}" if k in ("CPU", "GPU") else f"the resource {k!r}" for k, v in need.items())
    offers: dict[str, int] = {}
    for node in nodes:
        res = {k: v for k, v in node["resources"].items() if k not in _IGNORED_RESOURCES and not k.startswith(("node:", "accelerator_type:"))}
        text = ", ".join(f"{v:g} {k}" for k, v in sorted(res.items())) or "nothing"
        offers[text] = offers.get(text, 0) + 1
    offered = "; ".join(f"{text} ({n} node{'s' if n > 1 else ''})" for text, n in offers.items()) or "no alive node"
    return f"no node of the Ray cluster can run it: it needs {want}; the cluster offers {offered}"


def _discover() -> str | None:
    """Where Ray's "auto" would connect (RAY_ADDRESS, the cluster `ray start` recorded, a running one), None
    when there is none; "auto" when Ray's internals cannot be asked (ray.init then decides)."""
    try:
        from ray._private.services import get_ray_address_from_environment
    except ImportError:
        return "auto"
    try:
        return str(get_ray_address_from_environment("auto", None))
    except ConnectionError:
        return None
    except Exception:
        return "auto"


_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])  # the preface and an empty SETTINGS frame


def _probe(address: str, source: str = "--address") -> None:
    """Ask the head whether it speaks gRPC (a Ray GCS or Ray Client server does), within seconds: Ray's own
    connect retries a dead or wrong address for minutes."""
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise UserError(f"{source} {address!r}: expected HOST:PORT (e.g. 127.0.0.1:6379)")
    try:
        conn = socket.create_connection((host.strip("[]"), int(port)), timeout=5)
    except OSError as e:
        raise UserError(f"no Ray cluster answers at {hostport} ({source}: {e.strerror or e}): start one with "
                        f"`ray start --head --port {port}`, or check the address") from None
    with conn:
        try:
            conn.sendall(_H2_PREFACE)
            head = conn.recv(9)
        except OSError:
            head = b""
    if len(head) < 4 or head[3] != 4:  # a gRPC server answers the preface with its SETTINGS frame
        raise UserError(f"{hostport} ({source}) answers, but not as a Ray cluster (no gRPC server there): check the port "
                        "(`ray start --head` prints the address to use)")


# ---------------------------------------------------------------- archives
# ---------------------------------------------------------------- on the node
class _Control:
    """An actor the driver owns: tells running tasks to stop (the bench was interrupted)."""

    def __init__(self) -> None:
        self.stopping = False

    def stop(self) -> None:
        self.stopping = True

    def stopped(self) -> bool:
        return self.stopping


def _work(bundle: dict[str, Any], events: Any, control: Any) -> dict[str, Any]:
    """The Ray task: unpack, run the item in a worker process, pack its run directory. Runs on a node."""
    import ray

    item = WorkItem.model_validate_json(bundle["item"])
    host = f"{platform.node()}/{ray.get_runtime_context().get_node_id()[:8]}"
    send = _Sender(events)
    send(("start", item.key, host))
    if bundle["version"] != __version__:
        return {"result": WorkResult(key=item.key, status="failed", run_dir=item.run_dir, host=host,
                                     error=f"kernopt {__version__} on {host}, {bundle['version']} on the driver: "
                                           "install the same version on every node").model_dump_json(), "archive": None}
    _sweep_stale()
    tmp = Path(tempfile.mkdtemp(prefix=TMP_PREFIX))
    (tmp / OWNER_FILE).write_text(str(os.getpid()))
    try:
        task_dir = tmp / "task" / bundle["task_name"]
        unpack(bundle["task"], task_dir)
        run_dir = tmp / "runs" / Path(item.run_dir).name
        value_path: str | None = None
        if bundle.get("value"):
            name, data = bundle["value"]
            (tmp / "value").mkdir()
            (tmp / "value" / name).write_bytes(data)
            value_path = str(tmp / "value" / name)
        if bundle.get("run"):
            unpack(bundle["run"], run_dir)
            _point_run_dir(run_dir, str(task_dir), str(run_dir.parent), value_path, str(run_dir))
        search = item.config.search.model_copy(update={"value_path": Path(value_path) if value_path else item.config.search.value_path})
        local = item.model_copy(update={
            "config": item.config.model_copy(update={"task": str(task_dir), "runs_dir": run_dir.parent, "search": search}),
            "run_dir": str(run_dir),
        })
        # what the user sees names the driver's paths, not this temporary directory
        swaps = [(str(run_dir), item.run_dir), (str(task_dir), item.config.task), (str(tmp), "<node tmp>")]

        def mend(text: str) -> str:
            for a, b in swaps:
                text = text.replace(a, b)
            return text

        result = _run_worker(local, tmp, host, send, mend, _StopFlag(control))
        archive = pack(run_dir) if run_dir.is_dir() else None
        result = result.model_copy(update={"run_dir": item.run_dir, "error": mend(result.error), "host": host})
        return {"result": result.model_dump_json(), "archive": archive}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


TMP_PREFIX = "kernopt-ray-"
OWNER_FILE = ".owner"  # the pid of the Ray worker whose task unpacked there


def _sweep_stale() -> None:
    """Remove what tasks killed outright left on this node (a cancelled task's Ray worker dies by SIGKILL,
    its cleanup never runs): temporary directories whose owner process is gone."""
    for d in Path(tempfile.gettempdir()).glob(TMP_PREFIX + "*"):
        try:
            pid = int((d / OWNER_FILE).read_text())
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except (OSError, ValueError):
            continue  # not ours to judge (unreadable, another user's, being created)


class _Sender:
    """Messages to the driver's queue; best effort (a driver that went away must not fail the item)."""

    def __init__(self, queue: Any) -> None:
        self.queue = queue

    def __call__(self, message: tuple[str, str, str]) -> None:
        with contextlib.suppress(Exception):
            self.queue.put(message, timeout=10)


class _StopFlag:
    """Whether the driver asked to stop, asked at most once a second; a driver that is gone counts as no."""

    def __init__(self, control: Any) -> None:
        self.control, self.next_ask, self.value = control, 0.0, False

    def __call__(self) -> bool:
        import ray

        if not self.value and time.monotonic() >= self.next_ask:
            self.next_ask = time.monotonic() + 1.0
            with contextlib.suppress(Exception):
                self.value = bool(ray.get(self.control.stopped.remote(), timeout=5))
        return self.value


def _run_worker(item: WorkItem, tmp: Path, host: str, send: _Sender, mend: Callable[[str], str], stop: Callable[[], bool]) -> WorkResult:
    """`python -m kernopt.bench.worker` on the item, its events forwarded; SIGTERM at the item's timeout
    or when the driver asks to stop."""
    started = time.monotonic()
    with open(tmp / "worker.stderr", "w+b") as stderr:
        proc = worker.spawn(item, stderr, cwd=str(tmp))
        outcome: list[WorkResult] = []

        def event(e: ProgressEvent) -> None:
            send(("event", item.key, e.model_copy(update={"host": host, "text": mend(e.text)}).model_dump_json()))

        reader = threading.Thread(target=worker.read_protocol, daemon=True,
                                  args=(proc, event, lambda r: outcome.append(r.model_copy(update={"host": host}))))
        reader.start()
        timed_out = stopped = False
        kill_at: float | None = None
        try:
            while proc.poll() is None:
                now = time.monotonic()
                if kill_at is None:
                    timed_out = item.timeout_s is not None and now - started >= item.timeout_s
                    stopped = not timed_out and stop()
                    if timed_out or stopped:
                        kill_at = now + KILL_GRACE_S
                        worker.signal_group(proc, signal.SIGTERM)
                elif now >= kill_at:
                    worker.signal_group(proc, signal.SIGKILL)
                time.sleep(0.1)  # a poll, not a blocking wait: Ray's cancellation must reach this thread
        finally:
            if proc.poll() is None:  # cancelled: the worker goes with us
                worker.signal_group(proc, signal.SIGKILL)
                proc.wait()
        reader.join(timeout=10)
        elapsed = round(time.monotonic() - started, 1)
        if timed_out:
            return worker.timed_out(item, elapsed, host, where=f" on {host}")
        if stopped:
            return WorkResult(key=item.key, status="crashed", run_dir=item.run_dir, elapsed_s=elapsed, host=host,
                              error="stopped: the bench was interrupted")
        if outcome:
            return outcome[0]
        return worker.died(item, proc.returncode, stderr, elapsed, host, where=f" on {host}", mend=mend)


