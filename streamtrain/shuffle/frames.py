"""Which frames from peers a worker acts on: every check before a frame touches its state.

Owned here, as pure functions over frames already read off a socket (no sockets, no
state; the ForwardingUnit's thread calls them):

* :func:`routing_id` and :func:`sender_of`: a DEALER's routing id is its worker id, a
  NUL and a random per-process nonce. The worker id names the sender; the nonce makes
  the id unguessable, so nobody can connect under a member's id and have that member's
  ACKs routed to them (the ROUTER refuses a second connection with an id in use, and
  never hands one over).
* :func:`check_batch`: a ``RecordBatch`` on the ROUTER must come from a member, under
  CURVE from the identity that member authenticated as (the ZAP handler binds each key
  to its member's worker id), parse, name its sender as origin and this job, and carry
  records of a topic this job reads. A batch that may deserve an answer but cannot be
  taken (from a worker not yet a member, of a newer schema version, of a topic this
  worker does not read) is a :class:`BatchRefusal`: the receiver answers REJECTED, and the
  sender re-routes at once instead of after its ACK timeout.
* :func:`check_control`: an ACK or a credit grant on a DEALER must parse and name the
  receiver it came from.
* :func:`check_event`: a state event must parse and come from the peer whose SUB socket
  it arrived on (each peer's events have their own socket, authenticated under CURVE by
  that peer's server key): nobody can announce another worker's state, or its ``LEFT``.

Each returns the decoded message, a :class:`BatchRefusal`, or the :class:`Drop` reason; the
caller counts drops and refusals.
"""

from __future__ import annotations

import enum
from collections.abc import Container, Sequence
from dataclasses import dataclass

from streamtrain.errors import SchemaError
from streamtrain.proto.data_plane_pb2 import BatchAck, CreditGrant, WorkerStateEvent
from streamtrain.shuffle import codec

__all__ = [
    "BatchRefusal",
    "Drop",
    "check_batch",
    "check_control",
    "check_event",
    "routing_id",
    "sender_of",
]

_SEPARATOR = b"\x00"


class Drop(enum.Enum):
    """Why a frame was dropped (or, inside a :class:`BatchRefusal`, refused)."""

    MALFORMED = enum.auto()  # not a frame of this protocol, or it does not parse
    NOT_A_MEMBER = enum.auto()  # from a worker not (yet) in the membership view
    IMPOSTOR = enum.auto()  # a frame naming another worker or job, or the wrong CURVE id
    NEWER_SCHEMA = enum.auto()  # a schema version this worker cannot read
    FOREIGN_TOPIC = enum.auto()  # records of a topic this job does not read


@dataclass(frozen=True, slots=True)
class BatchRefusal:
    """A batch to answer REJECTED (``reason``) rather than take; ``why`` is counted."""

    batch_id: str
    reason: str
    why: Drop


def routing_id(worker_id: str, nonce: bytes) -> bytes:
    """The routing id a worker's DEALERs connect with (see the module docstring)."""
    return worker_id.encode("utf-8") + _SEPARATOR + nonce


def sender_of(route: bytes) -> str | None:
    """The worker id in a routing id, or ``None`` when it is not one of ours."""
    worker, separator, nonce = route.partition(_SEPARATOR)
    if not separator or not worker or not nonce:
        return None
    try:
        return worker.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _refusal(payload: bytes | memoryview, sender: str, job: str, why: Drop) -> BatchRefusal | Drop:
    """A :class:`BatchRefusal` for ``sender``'s own batch of this job, else the plain drop."""
    header = codec.peek_batch(payload)
    if header is None or header.origin_worker != sender or header.job != job:
        return why if why is not Drop.NEWER_SCHEMA else Drop.MALFORMED
    if not header.batch_id:
        return Drop.MALFORMED
    if why is Drop.NOT_A_MEMBER:
        reason = "unknown peer"
    elif why is Drop.NEWER_SCHEMA:
        reason = (
            f"schema version {header.schema_version} is newer than {codec.BATCH_SCHEMA_VERSION}, "
            "which this worker reads"
        )
    else:
        reason = f"topic {header.topic!r} is not read by this job"
    return BatchRefusal(header.batch_id, reason, why)


def check_batch(
    sender: str,
    payload: bytes | memoryview,
    *,
    members: Container[str],
    job: str,
    curve: bool,
    user_id: object = None,
    topics: Container[str] | None = None,
) -> codec.DecodedBatch | BatchRefusal | Drop:
    """The batch ``sender`` (the worker id of its routing id) sent, or why it is not taken.

    ``curve``: the sockets authenticate, and ``user_id`` is the identity the sender's
    CURVE key was accepted as (it must be the sender). ``topics``: the topics this job
    reads (``None``: any).
    """
    if curve and user_id != sender:
        return Drop.IMPOSTOR
    if sender not in members:
        return _refusal(payload, sender, job, Drop.NOT_A_MEMBER)
    try:
        batch = codec.decode_batch(payload)
    except SchemaError:
        header = codec.peek_batch(payload)
        if header is not None and header.schema_version > codec.BATCH_SCHEMA_VERSION:
            return _refusal(payload, sender, job, Drop.NEWER_SCHEMA)
        return Drop.MALFORMED
    if batch.origin_worker != sender or batch.job != job:
        return Drop.IMPOSTOR
    if topics is not None and batch.columns.topic not in topics:
        return _refusal(payload, sender, job, Drop.FOREIGN_TOPIC)
    return batch


def check_control(frames: Sequence[bytes], receiver: str) -> BatchAck | CreditGrant | Drop:
    """What ``receiver`` answered on the DEALER connected to it, or why it is dropped."""
    if len(frames) != 2:
        return Drop.MALFORMED
    try:
        message = codec.decode_control(frames[0], frames[1])
    except SchemaError:
        return Drop.MALFORMED
    if isinstance(message, BatchAck | CreditGrant) and message.receiver_worker == receiver:
        return message
    if isinstance(message, BatchAck | CreditGrant):
        return Drop.IMPOSTOR
    return Drop.MALFORMED


def check_event(frames: Sequence[bytes], *, peer: str, job: str) -> WorkerStateEvent | Drop:
    """A state event from the SUB socket connected to ``peer``, or why it is dropped."""
    if len(frames) != 2 or frames[0] != codec.KIND_STATE:
        return Drop.MALFORMED
    try:
        event = codec.decode_control(frames[0], frames[1])
    except SchemaError:
        return Drop.MALFORMED
    if not isinstance(event, WorkerStateEvent):  # pragma: no cover - KIND_STATE decodes to it
        return Drop.MALFORMED
    if event.job != job or event.worker_id != peer:
        return Drop.IMPOSTOR
    return event
