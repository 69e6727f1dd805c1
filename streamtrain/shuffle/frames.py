"""Which frames from peers a worker acts on: every check before a frame touches its state.

Owned here, as pure functions over frames already read off a socket (no sockets, no
state; the ForwardingUnit's thread calls them):

* :func:`check_batch`: a ``RecordBatch`` on the ROUTER must come from a member, under
  CURVE from the identity that member authenticated as, parse, and name its sender as
  origin and this job;
* :func:`check_control`: an ACK or a credit grant on a DEALER must parse, and a grant
  must name the receiver it came from;
* :func:`check_event`: a state event on the SUB must parse and come from a member of
  this job.

Each returns the decoded message or the :class:`Drop` reason; the caller counts drops.
:func:`refusable_batch_id` says when a non-member's batch deserves an answer (REJECTED
"unknown peer": it may have learned of this worker before this worker learned of it,
and retries at once instead of after its ACK timeout).
"""

from __future__ import annotations

import enum
from collections.abc import Container, Sequence

from streamtrain.errors import SchemaError
from streamtrain.proto.data_plane_pb2 import BatchAck, CreditGrant, WorkerStateEvent
from streamtrain.shuffle import codec

__all__ = ["Drop", "check_batch", "check_control", "check_event", "refusable_batch_id"]


class Drop(enum.Enum):
    """Why a frame was dropped."""

    MALFORMED = enum.auto()  # not a frame of this protocol, or it does not parse
    NOT_A_MEMBER = enum.auto()  # from a worker not (yet) in the membership view
    IMPOSTOR = enum.auto()  # a member's frame naming another worker or job, or wrong CURVE id


def check_batch(
    sender: str,
    payload: bytes | memoryview,
    *,
    members: Container[str],
    job: str,
    curve: bool,
    user_id: object = None,
) -> codec.DecodedBatch | Drop:
    """The batch ``sender`` (its ROUTER routing id) sent, or why it is dropped.

    ``curve``: the sockets authenticate, and ``user_id`` is the identity the sender's
    CURVE key was accepted as (it must be the sender).
    """
    if sender not in members:
        return Drop.NOT_A_MEMBER
    if curve and user_id != sender:
        return Drop.IMPOSTOR
    try:
        batch = codec.decode_batch(payload)
    except SchemaError:
        return Drop.MALFORMED
    if batch.origin_worker != sender or batch.job != job:
        return Drop.IMPOSTOR
    return batch


def refusable_batch_id(sender: str, payload: bytes | memoryview, *, job: str) -> str | None:
    """The id of a non-member's batch to answer REJECTED, or ``None`` (it does not parse,
    or is not ``sender``'s own batch of this job: no answer)."""
    try:
        batch = codec.decode_batch(payload)
    except SchemaError:
        return None
    if batch.origin_worker == sender and batch.job == job:
        return batch.batch_id
    return None


def check_control(frames: Sequence[bytes], receiver: str) -> BatchAck | CreditGrant | Drop:
    """What ``receiver`` answered on the DEALER connected to it, or why it is dropped."""
    if len(frames) != 2:
        return Drop.MALFORMED
    try:
        message = codec.decode_control(frames[0], frames[1])
    except SchemaError:
        return Drop.MALFORMED
    if isinstance(message, BatchAck):
        return message
    if isinstance(message, CreditGrant) and message.receiver_worker == receiver:
        return message
    return Drop.MALFORMED


def check_event(
    frames: Sequence[bytes], *, members: Container[str], job: str
) -> WorkerStateEvent | Drop:
    """A peer's state event from the SUB, or why it is dropped."""
    if len(frames) != 2 or frames[0] != codec.KIND_STATE:
        return Drop.MALFORMED
    try:
        event = codec.decode_control(frames[0], frames[1])
    except SchemaError:
        return Drop.MALFORMED
    if not isinstance(event, WorkerStateEvent):  # pragma: no cover - KIND_STATE decodes to it
        return Drop.MALFORMED
    if event.job != job or event.worker_id not in members:
        return Drop.NOT_A_MEMBER
    return event
