"""A worker's memory, against what its local queue holds: the numbers and the bound.

Owned here: the bytes a queued record costs (:func:`record_bytes`: its payload and its
four column entries), the process's resident set read from ``/proc/self/status``
(:func:`rss_bytes`, :func:`peak_rss_bytes`; 0 where there is no such file), and the
bound a worker is held to: its RSS growth with a full local queue is at most
twice the queued records' own bytes plus :data:`RSS_CONSTANT_MIB`. Twice, because
librdkafka may hold as much again in its pre-fetch queue (bounded by
``queued.max.messages.kbytes``, derived from the queue size:
:meth:`~streamtrain.ingest.settings.IngestSettings.fetch_properties`); the constant
covers allocator slack and the consumer's own buffers. ``benchmarks/ingest.py``
measures it; the worker's JSON summary reports it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from streamtrain.records import RecordColumns

__all__ = [
    "COLUMN_BYTES_PER_RECORD",
    "RSS_CONSTANT_MIB",
    "memory_report",
    "peak_rss_bytes",
    "record_bytes",
    "rss_bound_bytes",
    "rss_bytes",
]

COLUMN_BYTES_PER_RECORD: Final = 4 + 8 + 8 + 8
"""A queued record's column entries: partition (int32), offset, timestamp and payload
bound (int64)."""
RSS_CONSTANT_MIB: Final = 32
"""The constant of the bound (MiB): allocator slack, librdkafka's fetch buffers beyond
its queue, numpy's and the decoder's working arrays."""

_STATUS = Path("/proc/self/status")


def record_bytes(chunk: RecordColumns) -> int:
    """What ``chunk`` holds in memory: its payloads and its column entries."""
    return chunk.payload_bytes + COLUMN_BYTES_PER_RECORD * len(chunk)


def rss_bound_bytes(queued_bytes: int) -> int:
    """The RSS growth allowed with ``queued_bytes`` queued: twice that, plus the constant."""
    return 2 * queued_bytes + RSS_CONSTANT_MIB * 2**20


def _status_kib(field: str) -> int:
    try:
        text = _STATUS.read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith(field):
            return int(line.split()[1])
    return 0


def rss_bytes() -> int:
    """This process's resident set now (``VmRSS``), 0 where it cannot be read."""
    return _status_kib("VmRSS:") * 1024


def peak_rss_bytes() -> int:
    """This process's largest resident set so far (``VmHWM``), 0 where unknown."""
    return _status_kib("VmHWM:") * 1024


def memory_report(start_rss_bytes: int, queue_peak_bytes: int | None) -> dict[str, float | bool]:
    """A worker's memory for its summary (MiB): its RSS when the consumer started (plus
    what the app's first training step alone allocated, when the worker counts it), its
    peak and its RSS now; with the local queue's peak bytes, the bound and whether the
    peak growth stayed within it."""
    mib = float(2**20)
    peak = peak_rss_bytes()
    report: dict[str, float | bool] = {
        "rss_start_mib": round(start_rss_bytes / mib, 1),
        "rss_peak_mib": round(peak / mib, 1),
        "rss_end_mib": round(rss_bytes() / mib, 1),
    }
    if queue_peak_bytes is not None and start_rss_bytes and peak:
        bound = rss_bound_bytes(queue_peak_bytes)
        report["queue_peak_mib"] = round(queue_peak_bytes / mib, 3)
        report["rss_growth_mib"] = round((peak - start_rss_bytes) / mib, 1)
        report["rss_bound_mib"] = round(bound / mib, 1)
        report["within_bound"] = peak - start_rss_bytes <= bound
    return report
