"""Worker processes that end with their parent and leave Ctrl-C to it.

A sweep's worker computes results only its parent (the driver) writes: once the parent is gone
its work is lost, so it must stop at once rather than run on at 100% CPU and then wait forever.
`become_worker(parent)` makes the calling process such a worker:

* the kernel kills it when its parent dies (Linux `prctl(PR_SET_PDEATHSIG, SIGKILL)`);
* a watchdog thread also checks every `WATCHDOG_S` seconds that the parent is still its parent
  (other systems, and the window before prctl took effect) and exits if not;
* SIGINT is ignored: Ctrl-C in a terminal reaches every process of the foreground group, and only
  the parent decides what an interruption keeps (it stops its workers itself), so no worker prints
  a KeyboardInterrupt traceback.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time

WATCHDOG_S = 0.5  # a worker outlives its parent by at most about this much where prctl is missing
_PR_SET_PDEATHSIG = 1


def _kill_on_parent_death() -> bool:
    """Ask Linux to SIGKILL this process when its parent thread dies; False where that is not offered."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent: int) -> None:
    while True:
        if os.getppid() != parent:
            os._exit(1)  # the parent is gone (this process was re-parented): nobody will read the results
        time.sleep(WATCHDOG_S)


def become_worker(parent: int) -> None:
    """Make this process a worker of `parent` (its pid): killed when the parent dies, watched, and
    deaf to SIGINT (see the module docstring). Call it first thing in the worker (a pool initializer)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _kill_on_parent_death()
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)
    threading.Thread(target=_watch, args=(parent,), name="formal-rope-parent-watchdog", daemon=True).start()


def stop_children(timeout: float = 5.0) -> None:
    """Terminate this process's multiprocessing children (a pool's workers) and wait up to `timeout`
    seconds for them, killing those that are still there: after Ctrl-C, the work in flight is dropped."""
    import multiprocessing  # function-local: loaded with a pool of workers, not on the command line's start-up

    children = multiprocessing.active_children()
    for child in children:
        child.terminate()
    deadline = time.monotonic() + timeout
    for child in children:
        child.join(max(0.0, deadline - time.monotonic()))
        if child.is_alive():
            child.kill()
            child.join(1.0)
