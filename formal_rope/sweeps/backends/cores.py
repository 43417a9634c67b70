"""Idle cores for evaluation: a local pool's driver tells its workers how many units are in flight.

A sweep of W local workers whose units train with T torch threads each has W x T threads' worth of
cores. Whenever fewer units than workers are left (at the end of every sweep, and throughout a
grid of fewer packs than workers), finished workers sit idle while the last units evaluate: in the
main job (`reproduce table2`, two packs on two workers), the (ab)* pack's 460 test lengths ran on one
core while the (aa)* pack's worker, done early, waited.

Evaluation gives the same bits at any thread count (`evaluation.length_generalization`), so a unit's
evaluation takes T x W // busy threads (at least its own T): its own share and the idle workers'.
Training keeps its T threads: its loss and gradient reductions, and so its numbers, depend on them.

The driver writes the count of units in flight to a small file (`BusyUnits`); a worker reads it
before each batch of evaluation (`CoreShare.evaluation_threads`). A stale read costs one batch at
the old thread count, never a different result.

Workers are forked from the driver, and GNU OpenMP (torch's CPU threads) is not fork-safe: a child
of a process that has already run torch ops on several threads hangs in its first parallel region
on more than one thread. The command line's driver never has (it leaves torch to the workers),
but a Python caller's process may, so `forked_workers_may_widen` forks a probe first: a child
that computes on two threads and exits. Only when it finishes do forked workers widen. Where it
hangs, the local pool gives units that train on several threads (`--cpus-per-run`, or packs on a
machine with more cores than workers) spawned workers, fresh interpreters whose torch starts
clean (that hang was there before idle cores were shared: tests/test_eval_threads.py).
"""

from __future__ import annotations

import os
import signal
import struct
import sys
import tempfile
import time
from dataclasses import dataclass

_COUNT = struct.Struct("<i")
PROBE_TIMEOUT_S = 2.0  # a forked child computes on two threads in milliseconds, or never
_PROBE_FAILED: set = set()  # this process's pid once a probe hung: its threads stay, so it is asked once


def forked_workers_may_widen(timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Whether a child forked from this process can run torch on more than one thread: True when
    torch is not loaded here (the workers load it afresh), else a forked probe that computes on two
    threads has to exit within `timeout` seconds (it is killed otherwise; a process whose probe
    hung is not probed again: its threads never go away). False where fork is not available."""
    torch = sys.modules.get("torch")
    if torch is None:
        return True
    if not hasattr(os, "fork") or os.getpid() in _PROBE_FAILED:
        return False
    child = os.fork()
    if child == 0:  # the probe: only os._exit leaves it, so nothing of the parent's runs twice
        try:
            torch.set_num_threads(2)
            # Above torch's grain size, so the fill runs on two threads (made here: a tensor made by
            # the parent would start the parent's own threads).
            torch.ones(1 << 20)
            os._exit(0)
        finally:
            os._exit(1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        finished, status = os.waitpid(child, os.WNOHANG)
        if finished:
            return os.waitstatus_to_exitcode(status) == 0
        time.sleep(0.002)
    os.kill(child, signal.SIGKILL)
    os.waitpid(child, 0)
    _PROBE_FAILED.add(os.getpid())
    return False


@dataclass(frozen=True)
class CoreShare:
    """What a worker needs to know to share the pool's cores: where the driver keeps the count of
    units in flight (`path`) and how many workers the pool has. Picklable (it travels in the task)."""

    path: str
    workers: int

    def busy(self) -> int | None:
        """How many units are in flight now (None: the count cannot be read, e.g. the driver is gone)."""
        try:
            with open(self.path, "rb") as handle:
                data = handle.read(_COUNT.size)
        except OSError:
            return None
        return _COUNT.unpack(data)[0] if len(data) == _COUNT.size else None

    def evaluation_threads(self, own: int) -> int:
        """The torch threads a unit training with `own` threads may evaluate with now: its share of
        the workers' threads (own x workers) among the units in flight, never fewer than `own`."""
        busy = self.busy()
        if busy is None or busy < 1:
            return own
        return max(own, own * self.workers // busy)


class BusyUnits:
    """The driver's side of a `CoreShare`: a temporary file holding the count of units in flight.
    Use as a context manager; the file is removed on exit."""

    def __init__(self, workers: int) -> None:
        descriptor, path = tempfile.mkstemp(prefix="formal-rope-busy-")
        self._descriptor = descriptor
        self.share = CoreShare(path=path, workers=int(workers))
        self.set(int(workers))

    def set(self, count: int) -> None:
        """Record that `count` units are in flight (one 4-byte write: a reader sees the old or the new count)."""
        os.pwrite(self._descriptor, _COUNT.pack(int(count)), 0)

    def close(self) -> None:
        if self._descriptor is not None:
            os.close(self._descriptor)
            self._descriptor = None
            try:
                os.unlink(self.share.path)
            except OSError:
                pass

    def __enter__(self) -> "BusyUnits":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
