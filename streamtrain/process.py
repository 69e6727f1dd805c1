"""Child processes: dying with their parent, being stopped, running at a lower priority.

The embedded broker, the local S3 server and the local worker pool start long-lived
children. On Linux each child asks the kernel for a signal (SIGTERM; the broker, SIGINT)
when the thread that forked it dies (the one ``PR_SET_PDEATHSIG`` helper), so nothing
outlives a parent killed outright (``kill -9``). Elsewhere there is no such call and the
parents' own shutdown paths are all there is. :func:`stop_children` is the one
signal-wait-kill sequence (:func:`stop_child` for one child): every child is signalled
first and they share one grace period, so stopping ten takes no longer than one.
:class:`ChildLog` is a server child's combined output: a temporary file it writes to
and whose last bytes go into the error when it fails to start. :func:`lower_priority`
is the one way a child (a forecaster's fit process, a simulator's replays) yields the
cores to its parent's work.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, Any

__all__ = [
    "ChildLog",
    "die_with_parent_initializer",
    "die_with_parent_preexec",
    "lower_priority",
    "stop_child",
    "stop_children",
]

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1


def die_with_parent_preexec(sig: signal.Signals = signal.SIGTERM) -> Callable[[], None] | None:
    """A ``preexec_fn`` for ``subprocess.Popen`` that asks for ``sig`` when the parent dies.

    ``prctl`` is looked up here, in the parent, so the child makes one C call between
    fork and exec. If the parent died before that call took effect, the child exits at
    once instead of running orphaned. ``None`` where ``prctl`` does not exist (not Linux).
    """
    if sys.platform != "linux":
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError) as exc:
        log.warning("prctl is unavailable (%s); children will not die with this process", exc)
        return None
    parent_pid = os.getpid()

    def die_with_parent() -> None:  # pragma: no cover - runs in the child
        prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent_pid:
            os._exit(1)

    return die_with_parent


def die_with_parent_initializer(parent_pid: int) -> None:  # pragma: no cover - in the child
    """The same for a ``multiprocessing`` child (a pool's ``initializer``, with
    ``initargs=(os.getpid(),)``): SIGTERM when the parent thread that started it dies,
    and exit at once if that parent is already gone."""
    if sys.platform == "linux":
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        except (OSError, AttributeError) as exc:
            log.warning("prctl is unavailable (%s); this child will not die with its parent", exc)
    if os.getppid() != parent_pid:
        os._exit(1)


def lower_priority(increment: int, what: str) -> None:
    """Make this process ``increment`` nicer (a process may always lower its own
    priority), every thread of it on Linux, where niceness is per thread and a pool
    started at import (numpy's BLAS threads) would keep the old one. Where that is
    refused or not supported, ``what`` keeps its priority, with a warning."""
    if increment <= 0:
        return
    try:
        niceness = os.nice(increment)
        if sys.platform == "linux":
            for task in os.listdir("/proc/self/task"):
                if int(task) != threading.get_native_id():
                    try:
                        os.setpriority(os.PRIO_PROCESS, int(task), niceness)
                    except ProcessLookupError:  # the thread ended meanwhile
                        continue
    except (OSError, AttributeError, ValueError) as exc:
        log.warning("%s keeps its priority: %s", what, exc)


def stop_child(
    process: subprocess.Popen[Any],
    what: str,
    timeout_s: float,
    sig: signal.Signals = signal.SIGTERM,
) -> int:
    """Send ``sig`` to a running ``process``, wait up to ``timeout_s``, then SIGKILL it
    (logged, naming ``what``); its exit code. A process that has exited is only reaped."""
    return stop_children([(process, what)], timeout_s, sig)[0]


def stop_children(
    children: Sequence[tuple[subprocess.Popen[Any], str]],
    timeout_s: float,
    sig: signal.Signals = signal.SIGTERM,
) -> list[int]:
    """Send ``sig`` to each running child (a process and what it is, for the log), wait
    up to ``timeout_s`` for all of them together, then SIGKILL those still running
    (logged); their exit codes, in order. Children that have exited are only reaped."""
    for process, _ in children:
        if process.poll() is None:
            process.send_signal(sig)
    deadline_s = time.monotonic() + timeout_s
    codes: list[int] = []
    for process, what in children:
        try:
            codes.append(process.wait(timeout=max(0.0, deadline_s - time.monotonic())))
        except subprocess.TimeoutExpired:
            log.warning(
                "%s (pid %d) still running %g s after %s; killing it",
                what,
                process.pid,
                timeout_s,
                sig.name,
            )
            process.kill()
            codes.append(process.wait())
    return codes


class ChildLog:
    """A child's combined stdout and stderr, in an anonymous temporary file.

    :meth:`open` creates the file to hand the child (``stdout=``), :meth:`tail` reads its
    last bytes without moving the offset the child writes at, :meth:`close` (idempotent)
    drops it. Before :meth:`open` and after :meth:`close` the tail is empty.
    """

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self._file: IO[bytes] | None = None

    def open(self) -> IO[bytes]:
        self.close()
        self._file = tempfile.TemporaryFile(prefix=self.prefix)  # noqa: SIM115 - closed by close()
        return self._file

    def tail(self, max_bytes: int = 2000) -> str:
        """The last ``max_bytes`` the child wrote ("" without a file or on a read error)."""
        if self._file is None:
            return ""
        try:
            fd = self._file.fileno()
            size = os.fstat(fd).st_size
            start = max(0, size - max_bytes)
            return os.pread(fd, size - start, start).decode("utf-8", errors="replace")
        except OSError:
            return ""

    def close(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            file.close()
