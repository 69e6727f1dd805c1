"""glibc heap settings for data-plane processes: large buffers stay in the heap.

Owned here: :func:`keep_large_buffers_in_heap`, called once by every data-plane
component that starts (the ingest consumers, the shuffle node). The data plane allocates
a payload buffer per chunk (ingest's column builder: 100 KiB to 1 MiB per batch; a
shuffle frame: about 200 KiB) and frees it a step later. glibc serves allocations above
its mmap threshold (128 KiB at start) with a fresh ``mmap()`` and gives freed heap tops
above its trim threshold back to the kernel, so each such buffer was written into new
pages: a page fault and a zeroed page per 4 KiB. Measured (without a broker:
the fetch side and the trainer side of ingest in one thread) that churn was half the
per-batch cost at 512-record batches and three quarters at 5,000; in the shuffle's
receiver, page faults were about 12 % of its cycles (``perf``).

The settings: allocations up to :data:`MMAP_THRESHOLD_BYTES` come from the heap, and
up to :data:`TRIM_THRESHOLD_BYTES` of free heap top is kept for the next buffer (that
much more resident memory at most, per arena; the worker's memory bound in
:mod:`streamtrain.ingest.memory` counts it). Elsewhere than glibc this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import threading
from typing import Final

__all__ = ["MMAP_THRESHOLD_BYTES", "TRIM_THRESHOLD_BYTES", "keep_large_buffers_in_heap"]

log = logging.getLogger(__name__)

MMAP_THRESHOLD_BYTES: Final = 4 * 2**20
TRIM_THRESHOLD_BYTES: Final = 16 * 2**20
_M_TRIM_THRESHOLD: Final = -1  # glibc <malloc.h>
_M_MMAP_THRESHOLD: Final = -3

_lock = threading.Lock()
_done: bool | None = None


def keep_large_buffers_in_heap() -> bool:
    """Apply the settings once per process; whether they are in effect (``False``: not
    glibc, or ``mallopt`` refused)."""
    global _done
    with _lock:
        if _done is None:
            _done = _apply()
        return _done


def _apply() -> bool:
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False  # not glibc (musl has no mallopt, macOS no libc of that name)
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    applied = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    )
    log.debug("malloc: large buffers in the heap: %s", applied)
    return applied
