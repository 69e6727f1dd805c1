"""The receiver state of one worker: watermark hysteresis and how records are split.

Owned here, as pure functions: :func:`next_receiving` (KALE §3.5.2: accept forwarded
records while the local queue is below the low watermark, refuse once it passes the
high watermark, accept again only below the low watermark) and
:func:`basic_local_share` (the ``basic`` policy's even split of a chunk over the job's
workers).
"""

from __future__ import annotations

__all__ = ["basic_local_share", "next_receiving"]


def next_receiving(receiving: bool, queue_records: int, low: int, high: int) -> bool:
    """The receiver state after the queue length became ``queue_records``."""
    if receiving:
        return queue_records <= high
    return queue_records < low


def basic_local_share(records: int, workers: int) -> int:
    """How many of ``records`` the reading worker keeps when ``workers`` share evenly.

    The reader keeps the rounded-up share, so with one worker it keeps everything and
    no peer ever receives more than the reader.
    """
    if workers <= 1:
        return records
    return -(-records // workers)
