"""Talking to workers of older releases during a rolling upgrade.

Owned here (pure: no sockets, no threads; the ForwardingUnit's thread drives it): the
dialects of the shuffle protocol that older releases speak, and how a worker tells which
one a peer speaks. A worker of an older release announces no ``batch_schema_version``
on ``<job>.members`` (:attr:`~streamtrain.shuffle.membership.PeerInfo.legacy`); every
batch to it is written in the version-1 form. Two older releases exist:

* :attr:`Dialect.ROUTED` (the release before columnar batches): its DEALERs connect
  with a routing id of worker id, NUL and nonce; it answers RECEIVED before ACKED and
  sends no credit grants.
* :attr:`Dialect.PLAIN` (the first release): its DEALERs connect with the bare worker
  id as routing id, and it answers a batch from any other routing id with nothing; it
  reads every answer but ACKED as a rejection (so it must never be sent RECEIVED), and
  its credit comes back only with ``CreditGrant`` frames (one per ACKED batch here).

As a receiver, a worker knows a sender's dialect from the routing id its batch came
with: a bare worker id is accepted only from a member that announced itself as legacy
(:func:`plain_sender`); a current member must use a nonce. As a sender, it cannot tell
the two older releases apart from their announcements (they are the same), so
:class:`LegacyDialer` starts with ROUTED (the release just before this one) and switches
on evidence: a batch to a legacy receiver that ran out of time with no answer at all
from that receiver since it was sent was dropped for its routing id, so the DEALER is
connected again in the other dialect. The cost is one ACK timeout per switch; the batch
itself is re-routed, never lost.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from streamtrain.shuffle import codec
from streamtrain.shuffle.membership import PeerInfo

__all__ = ["Dialect", "LegacyDialer", "batch_version", "plain_sender"]


class Dialect(enum.Enum):
    """How a worker of an older release speaks (see the module docstring)."""

    ROUTED = "routed"
    PLAIN = "plain"


def batch_version(peer: PeerInfo | None) -> int:
    """The ``RecordBatch`` form to write to ``peer``: the one it announced (1 for an older
    release), this release's for a peer not (yet) known."""
    return codec.BATCH_SCHEMA_VERSION if peer is None else peer.batch_schema_version


def plain_sender(route: bytes, members: Mapping[str, PeerInfo]) -> str | None:
    """The worker id of a batch's routing id that is a bare worker id, if that worker is
    a legacy member (the first release's DEALERs connect that way); otherwise ``None``."""
    try:
        worker = route.decode("utf-8")
    except UnicodeDecodeError:
        return None
    info = members.get(worker)
    if info is None or not info.legacy:
        return None
    return worker


class LegacyDialer:
    """Which dialect this worker's DEALER speaks to each legacy receiver."""

    def __init__(self) -> None:
        self._dialects: dict[str, Dialect] = {}
        self._answered_at: dict[str, float] = {}
        self._switched_at: dict[str, float] = {}

    def dialect(self, receiver: str) -> Dialect:
        """The dialect to connect to ``receiver`` with (ROUTED until evidence says not)."""
        return self._dialects.get(receiver, Dialect.ROUTED)

    def answered(self, receiver: str, now: float) -> None:
        """``receiver`` answered something on the DEALER at ``now``: the dialect works."""
        self._answered_at[receiver] = now

    def timed_out(self, receiver: str, sent_at: float, now: float) -> Dialect | None:
        """A batch sent to the legacy ``receiver`` at ``sent_at`` ran out of time at
        ``now``; the dialect to connect again with, or ``None`` to keep the current one
        (it answered since, or the batch went out before the last switch)."""
        never = float("-inf")
        if self._answered_at.get(receiver, never) >= sent_at:
            return None
        if self._switched_at.get(receiver, never) >= sent_at:
            return None
        switched = Dialect.PLAIN if self.dialect(receiver) is Dialect.ROUTED else Dialect.ROUTED
        self._dialects[receiver] = switched
        self._switched_at[receiver] = now
        return switched

    def forget(self, receiver: str) -> None:
        """``receiver`` left or restarted: learn its dialect again."""
        self._dialects.pop(receiver, None)
        self._answered_at.pop(receiver, None)
        self._switched_at.pop(receiver, None)
