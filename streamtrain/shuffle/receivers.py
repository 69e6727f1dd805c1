"""Each worker's own view of its peers as receivers, and credit-based flow control.

Owned here (no I/O, no threads; the ForwardingUnit's thread drives both):

* :class:`ReceiverList`: the sender side. Per peer: its receiver state from broadcast
  events (newer sequence wins; reset when the peer's incarnation changes), when it was
  last heard from (any event or answer: a batch the receiver has queued stays in flight
  while it keeps talking), and a suppression deadline after a rejection or an ACK
  timeout. :meth:`ReceiverList.choose` picks uniformly at random among the peers that
  may take a batch now (KALE §3.5.2), given how many records are in flight to each.
* :class:`CreditLedger`: the receiver side. Each sender may have at most
  ``window_records`` records admitted and not yet trained; the receiver admits a batch
  only within that window and frees it as its trainer acknowledges records.

Credit is ACK-clocked, never granted: a sender's credit at a receiver is the window
minus the records of its batches still in flight there
(:meth:`~streamtrain.shuffle.inflight.InFlightBatches.records_to`), and every batch
leaves the in-flight set exactly once (answered, timed out, or its receiver gone). No
message can be lost that would leave credit behind, so credit heals itself: a peer is
never starved because a grant went astray. The receiver's outstanding records for a
sender are never more than the sender's in-flight records to it (it frees them on
training, before its ACK travels back), so a sender within its credit never exceeds
the receiver's window.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from streamtrain.shuffle.membership import PeerInfo
from streamtrain.shuffle.policy import ShufflePolicy

__all__ = ["CreditLedger", "MembershipDiff", "ReceiverList"]


@dataclass(frozen=True, slots=True)
class MembershipDiff:
    """Peers to connect to and worker ids to forget (a new incarnation is both)."""

    added: tuple[PeerInfo, ...]
    removed: tuple[PeerInfo, ...]


@dataclass(slots=True)
class _Peer:
    info: PeerInfo
    receiving: bool = False
    sequence: int = -1
    left: bool = False
    suppressed_until: float = float("-inf")
    heard_at: float = float("-inf")


class ReceiverList:
    """The sender's receiver list (see the module docstring)."""

    def __init__(self, window_records: int, *, seed: int | None = None) -> None:
        self._window = window_records
        self._peers: dict[str, _Peer] = {}
        self._rng = np.random.default_rng(seed)

    def __contains__(self, worker_id: object) -> bool:
        return worker_id in self._peers

    def __len__(self) -> int:
        return len(self._peers)

    def info(self, worker_id: str) -> PeerInfo | None:
        peer = self._peers.get(worker_id)
        return None if peer is None else peer.info

    def sync(self, members: Mapping[str, PeerInfo]) -> MembershipDiff:
        """Make the list match the membership view; a changed peer is removed and re-added."""
        removed = [
            peer.info for worker, peer in self._peers.items() if members.get(worker) != peer.info
        ]
        for info in removed:
            del self._peers[info.worker_id]
        added = [info for worker, info in members.items() if worker not in self._peers]
        for info in added:
            self._peers[info.worker_id] = _Peer(info)
        return MembershipDiff(tuple(added), tuple(removed))

    def on_state(self, worker_id: str, receiving: bool, sequence: int) -> bool:
        """Apply a RECEIVING/NOT_RECEIVING event; ``False`` if unknown peer or stale."""
        peer = self._peers.get(worker_id)
        if peer is None or peer.left or sequence <= peer.sequence:
            return False
        peer.receiving, peer.sequence = receiving, sequence
        return True

    def on_left(self, worker_id: str) -> bool:
        peer = self._peers.get(worker_id)
        if peer is None:
            return False
        peer.left, peer.receiving = True, False
        return True

    def heard(self, worker_id: str, now: float) -> None:
        """``worker_id`` said something (an event, an answer) at ``now``: it is alive."""
        peer = self._peers.get(worker_id)
        if peer is not None:
            peer.heard_at = max(peer.heard_at, now)

    def heard_at(self, worker_id: str) -> float:
        """When ``worker_id`` was last heard from (``-inf``: never, or not a peer)."""
        peer = self._peers.get(worker_id)
        return float("-inf") if peer is None else peer.heard_at

    def suppress(self, worker_id: str, until: float) -> None:
        peer = self._peers.get(worker_id)
        if peer is not None:
            peer.suppressed_until = max(peer.suppressed_until, until)

    def unsuppress(self, worker_id: str) -> None:
        peer = self._peers.get(worker_id)
        if peer is not None:
            peer.suppressed_until = float("-inf")

    def credit(self, worker_id: str, in_flight_records: int) -> int:
        """What ``worker_id`` may still be sent: the window less ``in_flight_records``
        (0 for a worker that is not a peer)."""
        if worker_id not in self._peers:
            return 0
        return max(self._window - in_flight_records, 0)

    def available(
        self, now: float, policy: ShufflePolicy, in_flight: Mapping[str, int] | None = None
    ) -> list[str]:
        """Peers that may take a batch now, sorted by worker id; ``in_flight`` maps a
        peer to the records of its batches still awaiting an answer (default: none)."""
        if policy is ShufflePolicy.NONE:
            return []
        in_flight = in_flight or {}
        return sorted(
            worker
            for worker, peer in self._peers.items()
            if not peer.left
            and in_flight.get(worker, 0) < self._window
            and peer.suppressed_until <= now
            and (peer.receiving or policy is ShufflePolicy.BASIC)
        )

    def choose(
        self, now: float, policy: ShufflePolicy, in_flight: Mapping[str, int] | None = None
    ) -> str | None:
        """A receiver drawn uniformly from :meth:`available`, or ``None``."""
        candidates = self.available(now, policy, in_flight)
        if not candidates:
            return None
        return candidates[int(self._rng.integers(len(candidates)))]


class CreditLedger:
    """The receiver's credit accounts, one per sender (see the module docstring)."""

    def __init__(self, window_records: int) -> None:
        self._window = window_records
        self._outstanding: dict[str, int] = {}

    def admit(self, sender: str, records: int) -> bool:
        """Take a batch of ``records`` if the sender had the credit for it."""
        outstanding = self._outstanding.get(sender, 0)
        if outstanding + records > self._window:
            return False
        self._outstanding[sender] = outstanding + records
        return True

    def trained(self, sender: str, records: int) -> None:
        """``records`` of ``sender`` were trained: their credit is free again (the
        sender learns it from the ACK)."""
        self.release(sender, records)

    def release(self, sender: str, records: int) -> None:
        """Free ``records`` of ``sender``'s window (trained, or refused after all)."""
        outstanding = self._outstanding.get(sender)
        if outstanding is not None:
            left = max(outstanding - records, 0)
            if left:
                self._outstanding[sender] = left
            else:
                del self._outstanding[sender]

    def reset(self, sender: str) -> None:
        """The sender restarted or left: its old batches no longer count against it."""
        self._outstanding.pop(sender, None)

    def outstanding(self, sender: str) -> int:
        return self._outstanding.get(sender, 0)
