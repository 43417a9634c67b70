"""The Ray backend: each unit of work (a pack of runs) is a Ray task with its own resource request.

Ray core tasks fit this work better than Ray Tune: a grid is a fixed list of independent units
with no search algorithm, no trial scheduler and no early stopping across runs, and this package
already writes its own results (Parquet in the driver) and its own training state (see
formal_rope.storage.training_state). Tasks give what a cluster adds — resource requests (`num_cpus`,
fractional `num_gpus`), retries of work lost with a worker or node (`max_retries`), cancellation,
a dashboard — without Tune's experiment folders, trial actors and checkpoint syncing.

Ray is imported only here (function-local: it stays off every other path, the command line's
start-up included), and only when a sweep runs with `backend="ray"`.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Callable, Sequence

from formal_rope.errors import FormalRopeError
from formal_rope.sweeps.backends.base import (
    WORKER_DIED,
    BackendOptions,
    Capacity,
    NodeLost,
    Unit,
    UnitRunner,
    WorkerDied,
)

INSTALL_HINT = 'pip install -e ".[ray]"'
PROBE_TIMEOUT_S = 5.0  # per probe; connecting (two probes, then ray.init) stays well under 30 s
POLL_S = 0.5  # how often the driver collects finished tasks and start reports, and checks its node
# How long the driver waits for the start reports of one poll. Short: when the node dies, Ray's core
# worker ends the driver process (exit 1, no Python cleanup) about ten seconds later, and the driver
# must have noticed and said so by then.
BOARD_TIMEOUT_S = 2.0
# /proc/net/unix flag of a listening socket (__SO_ACCEPTCON).
_LISTENING = 0x10000


def import_ray():
    """The ray module, or a FormalRopeError naming the install command."""
    try:
        import ray  # function-local: only a Ray sweep imports Ray
    except ImportError:
        raise FormalRopeError(
            f"--backend ray needs Ray, which is not installed here: run `{INSTALL_HINT}` in the checkout "
            "(or `pip install 'formal-rope[ray]'`), or use --backend local"
        ) from None
    return ray


# ----------------------------------------------------------------------------------------------
# Connecting


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not (port.isascii() and port.isdigit()):
        raise FormalRopeError(
            f"--address {address!r} is not HOST:PORT (or auto, for the cluster `ray start` runs here)"
        )
    return host.strip("[]"), int(port)


def resolve_address(address: str) -> str:
    """The GCS address (host:port) Ray would connect to for `address` ("auto" reads RAY_ADDRESS or
    the cluster `ray start` recorded on this machine); FormalRopeError when there is none."""
    if address.startswith("ray://"):
        return address  # Ray Client: probed at host:port below, connected by ray.init
    try:
        from ray._private.services import canonicalize_bootstrap_address
    except ImportError:  # a Ray without this helper: probe what was given
        return address
    try:
        resolved = canonicalize_bootstrap_address(address)
    except ConnectionError:
        raise FormalRopeError(
            f"--address {address}: no running Ray cluster was found on this machine (start one with "
            "`ray start --head`, or pass --address HOST:PORT of the head node)"
        ) from None
    except ValueError as error:
        raise FormalRopeError(f"--address {address!r}: {error}") from None
    if resolved is None:
        raise FormalRopeError(f"--address {address!r} names no cluster; pass HOST:PORT or auto")
    return resolved


def probe_address(address: str, given: str) -> None:
    """FormalRopeError unless something answers at `address` and speaks HTTP/2 (gRPC, as Ray's GCS).

    ray.init keeps retrying an address that does not answer for minutes; these two probes bound
    the wait to PROBE_TIMEOUT_S each.
    """

    host, port = _host_port(address.removeprefix("ray://"))
    origin = "" if given == address else f" (from --address {given})"
    try:
        connection = socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S)
    except OSError as error:
        raise FormalRopeError(
            f"no Ray cluster answers at {address}{origin}: {error.strerror or error}. Start one with "
            f"`ray start --head --port {port}` on the head node, check the host, port and firewall, or run "
            "without --address for a Ray instance on this machine"
        ) from None
    with connection:
        if os.environ.get("RAY_USE_TLS", "0") not in ("0", "") or address.startswith("ray://"):
            return  # TLS or Ray Client: not plain HTTP/2 on this port
        # HTTP/2 client preface and an empty SETTINGS frame; a gRPC server answers with SETTINGS.
        connection.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))
        try:
            answer = connection.recv(9)
        except OSError:
            answer = b""
    if len(answer) < 4 or answer[3] != 4:
        raise FormalRopeError(
            f"{address}{origin} answers but is not a Ray cluster (no gRPC server there): pass the GCS port "
            "that `ray start --head` printed (6379 by default), not the dashboard's or the client server's"
        )


def connect(ray, address: str | None, num_cpus: float, ship_code: bool) -> tuple[bool, str | None]:
    """Connect this process to Ray; (whether a connection was opened here, dashboard URL or None).

    An open connection is used as it is. Otherwise `address` is probed and joined, or, without
    one, a local Ray instance with `num_cpus` CPUs is started. With `ship_code`, the workers import
    this copy of formal_rope (uploaded to the cluster), so every node runs the driver's code.
    """
    if ray.is_initialized():
        return False, _dashboard_url(ray, None)
    runtime_env = None
    if ship_code:
        package = Path(__file__).resolve().parents[2]  # formal_rope/, from formal_rope/sweeps/backends/
        runtime_env = {"py_modules": [str(package)], "excludes": ["__pycache__", "*.pyc"]}
    options = dict(logging_level="ERROR", configure_logging=True, runtime_env=runtime_env)  # Ray reads level names
    try:
        if address is not None:
            probe_address(resolve_address(address), address)
            # The address as given: Ray enables token authentication by itself only for "auto".
            context = ray.init(address=address, **options)
        else:
            context = ray.init(address="local", num_cpus=num_cpus, **options)  # never a stale `ray start` cluster
    except FormalRopeError:
        raise
    except (ConnectionError, RuntimeError, ValueError, ray.exceptions.RayError) as error:
        where = f"the Ray cluster at {address}" if address else "a local Ray instance"
        if _refused_for_token(error, ray.exceptions.AuthenticationError):
            raise FormalRopeError(
                f"{where} asks for its authentication token: set RAY_AUTH_MODE=token and give this machine the "
                "head node's token (copy its ~/.ray/auth_token here, or set RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH); "
                "see https://docs.ray.io/en/latest/ray-security/token-auth.html"
            ) from None
        raise FormalRopeError(f"cannot connect to {where}: {str(error).strip().splitlines()[0]}") from None
    return True, _dashboard_url(ray, context)


def _refused_for_token(error: BaseException, authentication_error: type) -> bool:
    """Whether a failed ray.init came from token authentication (Ray wraps that error in others,
    sometimes only as text)."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, authentication_error) or "InvalidAuthToken" in str(error):
            return True
        error = error.__cause__ or error.__context__
    return False


def _dashboard_url(ray, context) -> str | None:
    url = getattr(context, "dashboard_url", None)
    if url is None:
        try:
            url = ray._private.worker.get_dashboard_url()
        except Exception:  # no dashboard (ray without [default], include_dashboard=False)
            url = None
    if not url:
        return None
    return url if "://" in url else f"http://{url}"


def socket_listening(path: str) -> bool | None:
    """Whether a process listens on the Unix socket `path` (Linux: /proc/net/unix); None when this
    system does not say. A raylet that died leaves its socket file behind, but nobody listens there."""
    try:
        with open("/proc/net/unix") as table:
            lines = table.read().splitlines()[1:]
    except OSError:
        return None
    for line in lines:
        parts = line.split(None, 7)
        if len(parts) == 8 and parts[7] == path and int(parts[3], 16) & _LISTENING:
            return True
    return False


def lost_node(ray) -> str | None:
    """What died of the Ray node this driver is attached to (its raylet, or the GCS of an instance
    started here), or None while it lives or cannot be told. Reads Ray's own record of the node
    (`ray._private.worker.global_worker.node`): the processes it started here, the raylet's socket."""
    try:
        node = ray._private.worker.global_worker.node
        dead = [(kind, process.pid) for kind, process in node.dead_processes() if kind in ("raylet", "gcs_server")]
        socket_name = node.raylet_socket_name
    except Exception:  # another Ray version's internals, or not connected: nothing to tell
        return None
    if dead:
        return "; ".join(f"its {kind} process (pid {pid}) exited" for kind, pid in dead)
    if socket_name and socket_listening(socket_name) is False:
        return f"its raylet no longer listens on {socket_name}"
    return None


# ----------------------------------------------------------------------------------------------
# Work on the workers


class StartBoard:
    """A tiny actor the tasks tell when they start (and on which process): Ray itself does not tell
    the driver when a queued task begins, and a second start of a unit is a retry after a lost worker."""

    def __init__(self):
        self._events: list[tuple[str, int, str]] = []

    def started(self, key: str, pid: int, node: str) -> None:
        self._events.append((key, pid, node))

    def drain(self) -> list[tuple[str, int, str]]:
        events, self._events = self._events, []
        return events


def run_unit_task(task: UnitRunner, unit: Unit, key: str, board) -> list:
    """The body of a Ray task: report the start, pick the device Ray assigned, train the unit."""
    import ray  # function-local: runs on a Ray worker, where Ray is imported anyway

    if board is not None:
        try:  # waited for, so that a worker killed right after still counts as started
            ray.get(board.started.remote(key, os.getpid(), ray.util.get_node_ip_address()), timeout=10)
        except Exception:  # progress reports are best effort; the work is not
            pass
    device = "cuda" if ray.get_gpu_ids() else task.device
    return task(unit, device=device)


# ----------------------------------------------------------------------------------------------
# The backend


class RayOptions(BackendOptions):
    """`--backend ray`: every run flag applies; a unit takes 1 CPU (and torch thread) unless
    --cpus-per-run says otherwise."""

    @property
    def threads(self) -> int:
        return 1 if self.cpus_per_run is None else super().threads

    def check_available(self) -> None:
        import_ray()  # not installed: exit 2 with the install command now, not after other checks

    @property
    def other_machines(self) -> bool:
        return self.address is not None


class RayBackend:
    """Units as Ray tasks: `cpus_per_run` CPUs (default 1) and `gpus_per_run` GPUs (fractions
    allowed) each; retried up to `max_retries` times when their worker or node is lost; tasks that
    got a GPU train on cuda. Joins the cluster at `address` ("auto": the one `ray start` runs here),
    or starts a local Ray instance of `workers` × `cpus_per_run` CPUs, shut down at the end."""

    def __init__(self, options: RayOptions = RayOptions()):
        self.address = options.address
        self.workers = options.workers
        self.cpus_per_run = options.cpus_per_run or 1
        self.gpus_per_run = options.gpus_per_run
        self.max_retries = options.max_retries
        self._ray = None
        self._opened = False
        self._board = None
        self._drain = None  # the board's drain call in flight (its reports are read once it answers)
        self._node_lost = False

    def open(self, on_note: Callable[[str], None]) -> Capacity:
        ray = self._ray = import_ray()
        self._opened, dashboard = connect(ray, self.address, self.workers * self.cpus_per_run,
                                          ship_code=self.address is not None)
        self._check_resources(ray, on_note)
        resources = ray.cluster_resources()
        where = f"cluster at {self.address}" if self.address else ("local instance" if self._opened else "instance")
        on_note(f"Ray {where}: {resources.get('CPU', 0):g} CPUs, {resources.get('GPU', 0):g} GPUs"
                + (f"; dashboard {dashboard}" if dashboard else ""))
        slots = resources.get("CPU", 0) // self.cpus_per_run
        if self.gpus_per_run > 0:
            slots = min(slots, resources.get("GPU", 0) // self.gpus_per_run)
        memory = resources.get("memory")
        return Capacity(slots=max(1, int(slots)), memory_bytes=int(memory) if memory else None, dashboard_url=dashboard)

    def close(self) -> None:
        ray = self._ray
        if ray is None:
            return
        if self._board is not None and not self._node_lost:  # the board died with the node
            try:
                ray.kill(self._board)
            except Exception:
                pass
            self._board = None
        if self._opened:
            ray.shutdown()
            self._opened = False

    def run(self, units: Sequence[Unit], task: UnitRunner, key_of: Callable[[Unit], str],
            on_unit: Callable[..., None]) -> None:
        ray = self._ray
        refs: dict = {}
        try:
            board = self._board = ray.remote(num_cpus=0, max_restarts=0)(StartBoard).remote()
            remote = ray.remote(
                num_cpus=self.cpus_per_run, num_gpus=self.gpus_per_run,
                max_retries=self.max_retries, retry_exceptions=False,
            )(run_unit_task)
            shared_task = ray.put(task)
            by_key: dict[str, Unit] = {}
            for unit in units:
                key = key_of(unit)
                by_key[key] = unit
                refs[remote.options(name=f"formalrope:{key}").remote(shared_task, unit, key, board)] = unit
            starts: dict[str, int] = {}
            pending = list(refs)
            while pending:
                ready, pending = ray.wait(pending, num_returns=len(pending), timeout=POLL_S, fetch_local=True)
                self._check_node(ray)
                board = self._report_starts(ray, board, by_key, starts, on_unit)
                for ref in ready:
                    unit = refs.pop(ref)
                    by_key.pop(key_of(unit), None)  # a late start report of a finished unit is ignored
                    on_unit("done", unit, self._results(ray, ref, unit, task))
        except KeyboardInterrupt:
            # Ctrl-C: stop every task now; each unit keeps the training state it last saved.
            for ref in refs:
                try:
                    ray.cancel(ref, force=True)
                except Exception:
                    pass
            raise

    def _check_node(self, ray) -> None:
        """NodeLost when the driver's Ray node died: every task in flight or queued is lost with it,
        and Ray's core worker is about to end this process (exit 1, Ray's log lines, no word from us)."""
        what = lost_node(ray)
        if what is not None:
            self._node_lost = True
            where = "the Ray instance this sweep started" if self._opened else "the Ray node this driver runs on"
            raise NodeLost(f"{where} died ({what}: killed, out of memory or crashed)")

    def _check_resources(self, ray, on_note: Callable[[str], None]) -> None:
        """A request no node can meet: an error on this machine's instance (no node will join), a
        note on a cluster (an autoscaler may add one)."""
        resources = ray.cluster_resources()
        for name, need, flag in (
            ("CPU", self.cpus_per_run, "--cpus-per-run"), ("GPU", self.gpus_per_run, "--gpus-per-run")
        ):
            have = resources.get(name, 0)
            if need > 0 and have < need:
                message = f"{flag} {need:g} but the Ray cluster has {have:g} {name}s in all"
                if self.address is None:
                    raise FormalRopeError(message + " (a Ray instance on this machine)")
                on_note(message + ": runs wait until a node with enough joins")

    def _report_starts(self, ray, board, by_key, starts, on_unit):
        if board is None:
            return None
        if self._drain is None:
            self._drain = board.drain.remote()
        try:
            events = ray.get(self._drain, timeout=BOARD_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:  # a busy node: this drain's reports come with a later poll
            return board
        except Exception:  # the board is gone: progress shows less, the sweep goes on
            self._drain = None
            return None
        self._drain = None
        for key, _pid, _node in events:
            unit = by_key.get(key)
            if unit is None:
                continue
            starts[key] = starts.get(key, 0) + 1
            on_unit("start" if starts[key] == 1 else "retry", unit)
        return board

    def _results(self, ray, ref, unit: Unit, task: UnitRunner) -> list:
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as error:
            # The task raised something the unit runner lets through (not an Exception).
            cause = error.cause if getattr(error, "cause", None) is not None else error
            return task.failed(unit, cause)
        except ray.exceptions.RayError as error:
            # The worker or its node died more than max_retries times (SIGKILL, out of memory, lost node).
            detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            message = f"{WORKER_DIED} ({self.max_retries} retries; Ray: {type(error).__name__}: {detail})"
            return task.failed(unit, WorkerDied(message))
