"""The ForwardingUnit: one worker's ZeroMQ side of the shuffle, on its own thread.

The ForwardingUnit is responsible for:

* its sockets, all created, used and closed on its one thread (pyzmq sockets are not
  thread-safe): a ROUTER receiving ``RecordBatch`` frames and answering with
  ``BatchAck``/``CreditGrant``; a DEALER per peer sending batches and reading the
  answers; a PUB broadcasting this worker's ``WorkerStateEvent`` on every transition and
  every ``state_rebroadcast_ms`` (late subscribers catch up); a SUB reading the peers'
  events; with CURVE, the ZAP handler and the handshake monitors;
* draining the ShuffleUnit's overflow: a receiver drawn uniformly from the available
  list, at most the credit it granted, one protobuf batch at a time;
* the brpc-style stream semantics (bookkept by
  :class:`~streamtrain.shuffle.inflight.InFlightBatches`): a forwarded batch is
  acknowledged to the offset tracker only when the receiver's ACK arrives; a rejection
  or an ACK timeout puts it back in front of the overflow (re-routed, or trained
  locally once there is room) and sets that receiver aside for a while; a peer that
  leaves gets its batches re-routed at once;
* dropping and counting every frame that does not parse, comes from a worker that is
  not a member, or names another worker than the one that sent it. A well-formed batch
  from a worker not (yet) a member is answered REJECTED ("unknown peer"), so a sender
  that learned of this worker first retries at once rather than after its ACK timeout.
  Every frame is counted in :class:`~streamtrain.shuffle.stats.ForwardingCounters`.

The decisions live in pure collaborators (``receivers``: whom to send to and how much;
``inflight``: what awaits an answer; ``frames``: which incoming frames count; ``unit``:
what to send and what to accept); this module is their socket thread. It never blocks
the trainer: the trainer and the consumer only touch the ShuffleUnit, which wakes this
thread through its :class:`~streamtrain.shuffle.mailbox.Mailbox`.
"""

from __future__ import annotations

import logging
import threading
import time

import zmq

from streamtrain.errors import ConfigError, StreamtrainError
from streamtrain.proto.data_plane_pb2 import BatchAck, WorkerStateEvent
from streamtrain.shuffle import codec
from streamtrain.shuffle.frames import (
    Drop,
    check_batch,
    check_control,
    check_event,
    refusable_batch_id,
)
from streamtrain.shuffle.inflight import InFlightBatches
from streamtrain.shuffle.mailbox import Mailbox
from streamtrain.shuffle.membership import Membership, PeerInfo, new_incarnation
from streamtrain.shuffle.receivers import CreditLedger, ReceiverList
from streamtrain.shuffle.settings import ShuffleSettings
from streamtrain.shuffle.sockets import PeerSockets
from streamtrain.shuffle.stats import Counters, ForwardingStats
from streamtrain.shuffle.unit import ShuffleUnit

__all__ = ["ForwardingStats", "ForwardingUnit"]

_LOG = logging.getLogger(__name__)
_MEMBERSHIP_SYNC_S = 0.1
_REJECT_BACKOFF_S = 0.05
_MAX_FRAMES_PER_ROUND = 256


class ForwardingUnit:
    """The ZeroMQ side of one worker's shuffle (see the module docstring)."""

    def __init__(
        self,
        unit: ShuffleUnit,
        membership: Membership,
        *,
        incarnation: int | None = None,
        seed: int | None = None,
    ) -> None:
        self._unit = unit
        self._settings: ShuffleSettings = unit.settings
        self._membership = membership
        self._incarnation = incarnation if incarnation is not None else new_incarnation()
        self._receivers = ReceiverList(self._settings.credit_window_records, seed=seed)
        self._ledger = CreditLedger(self._settings.credit_window_records)
        self._counters = Counters()
        self._count = self._counters.totals  # written by the unit's thread only
        self._mailbox = Mailbox()  # what the unit's callers tell this unit's thread
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self._me: PeerInfo | None = None
        self._in_flight = InFlightBatches(self._incarnation, self._settings.ack_timeout_s)
        self._members: dict[str, PeerInfo] = {}
        self._members_by_key: dict[bytes, str] = {}

    # lifecycle -------------------------------------------------------------------------

    @property
    def me(self) -> PeerInfo:
        if self._me is None:
            raise ConfigError("the ForwardingUnit has not been started")
        return self._me

    def start(self, timeout_s: float = 10.0) -> PeerInfo:
        """Bind the sockets on the unit's thread, announce this worker, start forwarding."""
        self._thread = threading.Thread(
            target=self._run, name=f"forwarding-{self._settings.worker_id}", daemon=True
        )
        self._thread.start()
        if not self._ready.wait(timeout_s) or self._me is None:
            self._stop.set()
            raise StreamtrainError(
                f"forwarding unit of {self._settings.worker_id} did not bind within "
                f"{timeout_s:g} s: {self._failure}"
            ) from self._failure
        self._unit.set_listener(self._mailbox)
        try:
            self._membership.start(self._me)
        except BaseException:
            self.stop()
            raise
        return self._me

    def stop(self, timeout_s: float = 10.0) -> None:
        """Withdraw from membership, broadcast LEFT, close every socket; idempotent."""
        self._unit.set_listener(None)
        try:
            self._membership.close()
        finally:
            self._stop.set()
            self._mailbox.wake()
            if self._thread is not None:
                self._thread.join(timeout_s)
                self._thread = None
            self._mailbox.close()

    def __enter__(self) -> ForwardingUnit:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    @property
    def failure(self) -> BaseException | None:
        """The error that stopped the unit's thread, if one did."""
        return self._failure

    def known_peers(self) -> list[str]:
        """The peers the unit's thread currently connects to, by worker id."""
        return sorted(self._members)

    def stats(self) -> ForwardingStats:
        return self._counters.snapshot(len(self._in_flight))

    # the thread ------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            with PeerSockets(self._settings) as sockets:
                self._me = PeerInfo(
                    worker_id=self._settings.worker_id,
                    data_endpoint=sockets.data_endpoint,
                    event_endpoint=sockets.event_endpoint,
                    incarnation=self._incarnation,
                    curve_public_key=(
                        None if self._settings.curve is None else self._settings.curve.public_key
                    ),
                )
                if self._settings.curve is not None:
                    sockets.start_zap(self._allowed_keys)
                self._ready.set()
                self._loop(sockets)
        except Exception as exc:  # noqa: BLE001 - recorded for the owner, who asks failure
            self._failure = exc
            self._ready.set()
            _LOG.exception("forwarding unit of %s failed", self._settings.worker_id)

    def _loop(self, sockets: PeerSockets) -> None:
        poller = zmq.Poller()
        poller.register(sockets.router, zmq.POLLIN)
        poller.register(sockets.sub, zmq.POLLIN)
        poller.register(self._mailbox.fd, zmq.POLLIN)
        for extra in sockets.extra_readers():
            poller.register(extra, zmq.POLLIN)
        self._publish(sockets, WorkerStateEvent.JOINED)
        next_sync = next_broadcast = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_sync:
                self._sync_members(sockets, poller)
                next_sync = now + _MEMBERSHIP_SYNC_S
            if now >= next_broadcast:
                self._publish_state(sockets)
                next_broadcast = now + self._settings.state_rebroadcast_ms / 1000.0
            self._expire(now)
            self._forward(sockets)
            timeout_s = min(next_sync, next_broadcast) - time.monotonic()
            deadline = self._in_flight.next_deadline()
            if deadline is not None:
                timeout_s = min(timeout_s, deadline - now)
            ready = dict(poller.poll(max(int(timeout_s * 1000), 0) + 1))
            if self._mailbox.fd in ready:
                self._mailbox.woken()
            self._answer_mailbox(sockets)
            if sockets.router in ready:
                self._read_router(sockets)
            if sockets.sub in ready:
                self._read_events(sockets)
            for worker, socket in list(sockets.dealers.items()):
                if socket in ready:
                    self._read_dealer(worker, socket)
            sockets.handle_security(ready, self._count)
        self._publish(sockets, WorkerStateEvent.LEFT)

    # membership ------------------------------------------------------------------------

    def _sync_members(self, sockets: PeerSockets, poller: zmq.Poller) -> None:
        try:
            members = dict(self._membership.peers())
        except StreamtrainError as exc:
            _LOG.warning("membership view unavailable, keeping the last one: %s", exc)
            return
        if self._settings.curve is not None:
            members = {w: p for w, p in members.items() if p.curve_public_key is not None}
        diff = self._receivers.sync(members)
        for info in diff.removed:
            sockets.disconnect(info, poller)
            self._ledger.reset(info.worker_id)
            self._reroute_from(info.worker_id)
        for info in diff.added:
            sockets.connect(info, poller)
        self._members = members
        self._members_by_key = {
            p.curve_public_key: w for w, p in members.items() if p.curve_public_key is not None
        }
        if diff.added or diff.removed:
            self._unit.set_peer_count(len(members))

    def _allowed_keys(self) -> dict[bytes, str]:
        """CURVE keys of the current members, read fresh at every handshake."""
        try:
            members = self._membership.peers()
        except StreamtrainError:
            return dict(self._members_by_key)
        return {p.curve_public_key: w for w, p in members.items() if p.curve_public_key}

    def _reroute_from(self, worker_id: str) -> None:
        for flight in self._in_flight.sent_to(worker_id):
            self._unit.return_overflow(flight.columns)
            self._count.batches_rerouted_on_leave += 1

    # sending ---------------------------------------------------------------------------

    def _forward(self, sockets: PeerSockets) -> None:
        settings = self._settings
        for _ in range(_MAX_FRAMES_PER_ROUND):
            if not self._unit.has_overflow():
                return
            now = time.monotonic()
            receiver = self._receivers.choose(now, settings.policy)
            if receiver is None:
                return
            budget = min(settings.batch_records, self._receivers.credit(receiver))
            columns = self._unit.pop_overflow(budget)
            if columns is None:
                return
            batch_id = self._in_flight.next_id()
            frame = codec.encode_batch(
                columns,
                job=settings.job,
                batch_id=batch_id,
                origin_worker=settings.worker_id,
                sent_at_ms=time.time_ns() // 1_000_000,
            )
            try:
                sockets.dealers[receiver].send_multipart(
                    [codec.KIND_BATCH, frame], flags=zmq.NOBLOCK, copy=False
                )
            except zmq.Again:
                self._unit.return_overflow(columns)
                self._receivers.suppress(receiver, now + _REJECT_BACKOFF_S)
                continue
            self._receivers.spend(receiver, len(columns))
            self._in_flight.sent(batch_id, receiver, columns, now)
            self._count.batches_sent += 1
            self._count.records_sent += len(columns)
            self._count.bytes_sent += len(frame)

    def _expire(self, now: float) -> None:
        for flight in self._in_flight.expired(now):
            # The receiver may never have admitted the batch (it dropped a frame from a
            # peer it did not know yet): without the refund its credit would be gone for
            # good. If it did admit it, its ledger rejects whatever goes beyond its window.
            self._receivers.refund(flight.receiver, len(flight.columns))
            self._receivers.suppress(flight.receiver, now + 2 * self._settings.ack_timeout_s)
            self._unit.return_overflow(flight.columns)
            self._count.batches_timed_out += 1

    def _publish(self, sockets: PeerSockets, state: WorkerStateEvent.State) -> None:
        receiving, queue_records, sequence = self._unit.receiver_state()
        if state in (WorkerStateEvent.RECEIVING, WorkerStateEvent.NOT_RECEIVING):
            state = WorkerStateEvent.RECEIVING if receiving else WorkerStateEvent.NOT_RECEIVING
        event = codec.encode_state(
            job=self._settings.job,
            worker_id=self._settings.worker_id,
            state=state,
            sequence=sequence,
            queue_records=queue_records,
            at_ms=time.time_ns() // 1_000_000,
        )
        try:
            sockets.pub.send_multipart([codec.KIND_STATE, event], flags=zmq.NOBLOCK)
            self._count.events_sent += 1
        except zmq.Again:
            pass

    def _publish_state(self, sockets: PeerSockets) -> None:
        self._publish(sockets, WorkerStateEvent.RECEIVING)

    def _answer_mailbox(self, sockets: PeerSockets) -> None:
        state_changed, trained = self._mailbox.take()
        if state_changed:
            self._publish_state(sockets)  # the current state covers every change
        for origin, batch_id, records in trained:
            self._answer(sockets, origin, batch_id, BatchAck.ACKED, "")
            grant = self._ledger.trained(origin, records)
            if grant:
                self._grant(sockets, origin, grant)

    def _answer(
        self,
        sockets: PeerSockets,
        origin: str,
        batch_id: str,
        status: BatchAck.Status,
        reason: str,
    ) -> None:
        ack = codec.encode_ack(
            job=self._settings.job,
            batch_id=batch_id,
            receiver=self._settings.worker_id,
            status=status,
            reason=reason,
            at_ms=time.time_ns() // 1_000_000,
        )
        self._to_peer(sockets, origin, codec.KIND_ACK, ack)

    def _grant(self, sockets: PeerSockets, sender: str, records: int) -> None:
        grant = codec.encode_grant(
            job=self._settings.job,
            receiver=self._settings.worker_id,
            sender=sender,
            records=records,
        )
        self._to_peer(sockets, sender, codec.KIND_CREDIT, grant)

    def _to_peer(self, sockets: PeerSockets, worker: str, kind: bytes, payload: bytes) -> None:
        try:
            sockets.router.send_multipart([worker.encode(), kind, payload], flags=zmq.NOBLOCK)
        except zmq.Again:
            # the sender's pipe is full or gone: it times the batch out and re-routes it
            self._count.control_send_failures += 1

    # receiving -------------------------------------------------------------------------

    def _dropped(self, drop: Drop) -> None:
        if drop is Drop.MALFORMED:
            self._count.malformed_frames_dropped += 1
        else:
            self._count.unknown_peer_frames_dropped += 1

    def _read_router(self, sockets: PeerSockets) -> None:
        curve = self._settings.curve is not None
        for _ in range(_MAX_FRAMES_PER_ROUND):
            try:
                frames = sockets.router.recv_multipart(flags=zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            if len(frames) != 3 or frames[1].bytes != codec.KIND_BATCH:
                self._dropped(Drop.MALFORMED)
                continue
            sender = frames[0].bytes.decode("utf-8", errors="replace")
            payload = frames[2].buffer
            batch = check_batch(
                sender,
                payload,
                members=self._members,
                job=self._settings.job,
                curve=curve,
                user_id=frames[1].get("User-Id") if curve else None,
            )
            if isinstance(batch, Drop):
                self._dropped(batch)
                refused = (
                    refusable_batch_id(sender, payload, job=self._settings.job)
                    if batch is Drop.NOT_A_MEMBER
                    else None
                )
                if refused is not None:
                    self._answer(sockets, sender, refused, BatchAck.REJECTED, "unknown peer")
                continue
            records = len(batch.columns)
            if not self._ledger.admit(sender, records):
                self._count.credit_violations += 1
                self._answer(sockets, sender, batch.batch_id, BatchAck.REJECTED, "no credit")
            elif self._unit.deliver_remote(sender, batch.batch_id, batch.columns):
                self._count.batches_received += 1
                self._count.records_received += records
                self._count.bytes_received += len(payload)
            else:
                self._ledger.release(sender, records)  # the sender refunds a rejected batch
                self._count.batches_refused += 1
                self._answer(sockets, sender, batch.batch_id, BatchAck.REJECTED, "not receiving")

    def _read_dealer(self, receiver: str, socket: zmq.Socket[bytes]) -> None:
        for _ in range(_MAX_FRAMES_PER_ROUND):
            try:
                message = check_control(socket.recv_multipart(flags=zmq.NOBLOCK), receiver)
            except zmq.Again:
                return
            if isinstance(message, Drop):
                self._dropped(message)
            elif isinstance(message, BatchAck):
                self._on_ack(receiver, message)
            else:
                self._receivers.on_credit(receiver, int(message.credit_records))

    def _on_ack(self, receiver: str, ack: BatchAck) -> None:
        flight = (
            self._in_flight.answered(ack.batch_id, receiver)
            if ack.receiver_worker == receiver
            else None
        )
        if flight is None:
            self._count.late_acks += 1
            if ack.status == BatchAck.ACKED:
                self._receivers.unsuppress(receiver)  # it is alive after all
            return
        if ack.status == BatchAck.ACKED:
            self._unit.ack_forwarded(flight.columns)
            self._count.batches_acked += 1
            self._count.records_acked += len(flight.columns)
            self._counters.add_rtt((time.monotonic() - flight.sent_at) * 1000.0)
        else:
            self._count.batches_rejected += 1
            self._receivers.refund(receiver, len(flight.columns))
            self._receivers.suppress(receiver, time.monotonic() + _REJECT_BACKOFF_S)
            self._unit.return_overflow(flight.columns)

    def _read_events(self, sockets: PeerSockets) -> None:
        for _ in range(_MAX_FRAMES_PER_ROUND):
            try:
                frames = sockets.sub.recv_multipart(flags=zmq.NOBLOCK)
            except zmq.Again:
                return
            event = check_event(frames, members=self._members, job=self._settings.job)
            if isinstance(event, Drop):
                self._dropped(event)
                continue
            self._count.events_received += 1
            if event.state == WorkerStateEvent.LEFT:
                self._receivers.on_left(event.worker_id)
                self._reroute_from(event.worker_id)
            elif event.state in (WorkerStateEvent.RECEIVING, WorkerStateEvent.NOT_RECEIVING):
                receiving = event.state == WorkerStateEvent.RECEIVING
                if not self._receivers.on_state(event.worker_id, receiving, event.sequence):
                    self._count.stale_events += 1
