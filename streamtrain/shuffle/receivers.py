"""Each worker's own view of its peers as receivers, and credit-based flow control.

Owned here (no I/O, no threads; the ForwardingUnit's thread drives both):

* :class:`ReceiverList`: the sender side. Per peer: its receiver state from broadcast
  events (newer sequence wins; reset when the peer's incarnation changes), the credit it
  granted and the sender has not used (a rejected or timed-out batch's credit is
  refunded), and a suppression deadline after a rejection or an ACK timeout.
  :meth:`ReceiverList.choose` picks uniformly at random among the peers that may take a
  batch now (KALE §3.5.2).
* :class:`CreditLedger`: the receiver side. Each sender starts with
  ``window_records`` of credit; the receiver admits a batch only within it, and returns
  credit as its trainer acknowledges records, coalesced into grants of at least a
  quarter window (or whatever is left once nothing is outstanding).
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
    credit_records: int = 0
    suppressed_until: float = float("-inf")


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
            self._peers[info.worker_id] = _Peer(info, credit_records=self._window)
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

    def on_credit(self, worker_id: str, records: int) -> None:
        peer = self._peers.get(worker_id)
        if peer is not None:
            peer.credit_records = min(peer.credit_records + records, self._window)

    def spend(self, worker_id: str, records: int) -> None:
        self._peers[worker_id].credit_records -= records

    def refund(self, worker_id: str, records: int) -> None:
        self.on_credit(worker_id, records)

    def suppress(self, worker_id: str, until: float) -> None:
        peer = self._peers.get(worker_id)
        if peer is not None:
            peer.suppressed_until = max(peer.suppressed_until, until)

    def unsuppress(self, worker_id: str) -> None:
        peer = self._peers.get(worker_id)
        if peer is not None:
            peer.suppressed_until = float("-inf")

    def credit(self, worker_id: str) -> int:
        peer = self._peers.get(worker_id)
        return 0 if peer is None else peer.credit_records

    def available(self, now: float, policy: ShufflePolicy) -> list[str]:
        """Peers that may take a batch now, sorted by worker id."""
        if policy is ShufflePolicy.NONE:
            return []
        return sorted(
            worker
            for worker, peer in self._peers.items()
            if not peer.left
            and peer.credit_records > 0
            and peer.suppressed_until <= now
            and (peer.receiving or policy is ShufflePolicy.BASIC)
        )

    def choose(self, now: float, policy: ShufflePolicy) -> str | None:
        """A receiver drawn uniformly from :meth:`available`, or ``None``."""
        candidates = self.available(now, policy)
        if not candidates:
            return None
        return candidates[int(self._rng.integers(len(candidates)))]


@dataclass(slots=True)
class _Account:
    outstanding: int = 0
    ungranted: int = 0


class CreditLedger:
    """The receiver's credit accounts, one per sender (see the module docstring)."""

    def __init__(self, window_records: int) -> None:
        self._window = window_records
        self._accounts: dict[str, _Account] = {}

    def admit(self, sender: str, records: int) -> bool:
        """Take a batch of ``records`` if the sender had the credit for it."""
        account = self._accounts.setdefault(sender, _Account())
        if account.outstanding + account.ungranted + records > self._window:
            return False
        account.outstanding += records
        return True

    def trained(self, sender: str, records: int) -> int:
        """``records`` of ``sender`` were acknowledged; the credit to grant now (maybe 0)."""
        account = self._accounts.get(sender)
        if account is None:
            return 0
        freed = min(records, account.outstanding)
        account.outstanding -= freed
        account.ungranted += freed
        if account.ungranted >= max(self._window // 4, 1) or account.outstanding == 0:
            grant, account.ungranted = account.ungranted, 0
            return grant
        return 0

    def release(self, sender: str, records: int) -> None:
        """Undo :meth:`admit` for a batch refused after all (the sender refunds it)."""
        account = self._accounts.get(sender)
        if account is not None:
            account.outstanding = max(account.outstanding - records, 0)

    def reset(self, sender: str) -> None:
        """The sender restarted or left: its old batches no longer count against it."""
        self._accounts.pop(sender, None)

    def outstanding(self, sender: str) -> int:
        account = self._accounts.get(sender)
        return 0 if account is None else account.outstanding
