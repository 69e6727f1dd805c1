"""What a ForwardingUnit counts, and the snapshot it hands out.

Owned here: :class:`ForwardingCounters` (monotonic totals of batches, records and bytes
sent and received, every kind of dropped frame, refusals, timeouts: typed fields, so a
misspelt counter is a type error, not a new key), :class:`ForwardingStats` (a snapshot:
a copy of the counters plus the batches in flight and the ACK round-trip percentiles)
and :class:`Counters`, the mutable side the unit's thread writes (the totals and the
round-trip times).
"""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from streamtrain.percentile import percentiles
from streamtrain.shuffle.frames import Drop

__all__ = ["COUNTER_NAMES", "Counters", "ForwardingCounters", "ForwardingStats"]


@dataclass(slots=True)
class ForwardingCounters:
    """The monotonic totals of one ForwardingUnit, as its thread updates them
    (``counters.batches_sent += 1``: a misspelt counter is a type error)."""

    batches_sent: int = 0
    records_sent: int = 0
    bytes_sent: int = 0
    # of those, records sent again after they came back (rejected, timed out, receiver
    # gone), the frames' bytes in proportion, and the frames that carried any
    records_resent: int = 0
    bytes_resent: int = 0
    batches_resent: int = 0
    batches_acked: int = 0
    records_acked: int = 0
    batches_rejected: int = 0
    batches_timed_out: int = 0
    batches_rerouted_on_leave: int = 0
    late_acks: int = 0
    batches_received: int = 0
    records_received: int = 0
    bytes_received: int = 0
    batches_refused: int = 0
    credit_violations: int = 0
    malformed_frames_dropped: int = 0
    unknown_peer_frames_dropped: int = 0
    impostor_frames_dropped: int = 0
    newer_schema_batches_refused: int = 0
    foreign_topic_batches_refused: int = 0
    handshakes_failed: int = 0
    zap_refused: int = 0
    peers_unreachable: int = 0
    events_sent: int = 0
    events_received: int = 0
    stale_events: int = 0
    control_send_failures: int = 0
    answers_lost: int = 0

    def count_sent(self, records: int, frame_bytes: int, resent_records: int) -> None:
        """A batch frame of ``records`` went out, ``resent_records`` of them sent before
        (they came back): its bytes count as re-sent in proportion."""
        self.batches_sent += 1
        self.records_sent += records
        self.bytes_sent += frame_bytes
        if resent_records:
            self.batches_resent += 1
            self.records_resent += resent_records
            self.bytes_resent += frame_bytes * resent_records // records

    def dropped(self, drop: Drop) -> None:
        """Count a frame dropped (or a batch refused) for ``drop``."""
        if drop is Drop.MALFORMED:
            self.malformed_frames_dropped += 1
        elif drop is Drop.NOT_A_MEMBER:
            self.unknown_peer_frames_dropped += 1
        elif drop is Drop.IMPOSTOR:
            self.impostor_frames_dropped += 1
        elif drop is Drop.NEWER_SCHEMA:
            self.newer_schema_batches_refused += 1
        else:
            self.foreign_topic_batches_refused += 1


@dataclass(slots=True)
class ForwardingStats(ForwardingCounters):
    """A snapshot of one ForwardingUnit: its counters (monotonic totals, copied at
    snapshot time: a value nobody updates), the batches in flight and the ACK round-trip
    percentiles."""

    in_flight_batches: int = 0
    ack_rtt_p50_ms: float = 0.0
    ack_rtt_p99_ms: float = 0.0


COUNTER_NAMES = tuple(f.name for f in fields(ForwardingCounters))
"""The counters' names (a :class:`ForwardingStats` adds what is measured at snapshot time)."""


class Counters:
    """Written by the unit's thread only. Another thread's :meth:`snapshot` reads each
    total as one attribute (never torn); totals only grow."""

    def __init__(self) -> None:
        self.totals = ForwardingCounters()
        self._rtt_lock = threading.Lock()
        self._rtt_ms: collections.deque[float] = collections.deque(maxlen=20_000)

    def add_rtt(self, rtt_ms: float) -> None:
        with self._rtt_lock:
            self._rtt_ms.append(rtt_ms)

    def rtt(self) -> np.ndarray[Any, np.dtype[np.float64]]:
        with self._rtt_lock:
            return np.array(self._rtt_ms, dtype=np.float64)

    def snapshot(self, in_flight_batches: int) -> ForwardingStats:
        totals = self.totals
        values = {name: getattr(totals, name) for name in COUNTER_NAMES}
        p50, p99 = percentiles(self.rtt(), (50, 99), empty=0.0)
        return ForwardingStats(
            **values,
            in_flight_batches=in_flight_batches,
            ack_rtt_p50_ms=p50,
            ack_rtt_p99_ms=p99,
        )
