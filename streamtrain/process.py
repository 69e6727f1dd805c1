"""Child processes that die with their parent: the one ``PR_SET_PDEATHSIG`` helper.

The embedded broker and the local worker pool start long-lived children. On Linux each
child asks the kernel for SIGTERM when the thread that forked it dies, so nothing
outlives a parent killed outright (``kill -9``). Elsewhere there is no such call and
the parents' own shutdown paths are all there is.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
from collections.abc import Callable

__all__ = ["die_with_parent_initializer", "die_with_parent_preexec"]

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
