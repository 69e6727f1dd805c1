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
* the brpc-style stream semantics: a forwarded batch is acknowledged to the offset
  tracker only when the receiver's ACK arrives; a rejection or an ACK timeout puts it
  back in front of the overflow (re-routed, or trained locally once there is room) and
  sets that receiver aside for a while; a peer that leaves gets its batches re-routed
  at once;
* dropping and counting every frame that does not parse, comes from a worker that is
  not a member, or names another worker than the one that sent it. A well-formed batch
  from a worker not (yet) a member is answered REJECTED ("unknown peer"), so a sender
  that learned of this worker first retries at once rather than after its ACK timeout.

It never blocks the trainer: the trainer and the consumer only touch the ShuffleUnit,
which wakes this thread through a pipe.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

import zmq

from streamtrain import wire
from streamtrain.errors import ConfigError, SchemaError, StreamtrainError
from streamtrain.ingest.records import RecordColumns
from streamtrain.proto.data_plane_pb2 import BatchAck, CreditGrant, WorkerStateEvent
from streamtrain.shuffle import codec
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


@dataclass(slots=True)
class _InFlight:
    receiver: str
    columns: RecordColumns
    sent_at: float


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
        self._inbox: collections.deque[tuple[str, Any]] = collections.deque()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._wake_pending = False
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self._me: PeerInfo | None = None
        self._pending: dict[str, _InFlight] = {}
        self._batch_ids = 0
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
        self._unit.set_listener(self)
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
            self._wake()
            if self._thread is not None:
                self._thread.join(timeout_s)
                self._thread = None
            for fd in (self._wake_r, self._wake_w):
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._wake_r = self._wake_w = -1

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
        return self._counters.snapshot(len(self._pending))

    # ShuffleListener (called by the unit from other threads, with its lock held) -------

    def state_changed(self, receiving: bool, queue_records: int, sequence: int) -> None:
        self._inbox.append(("state", (receiving, queue_records, sequence)))
        self._wake()

    def remote_batch_trained(self, origin_worker: str, batch_id: str, records: int) -> None:
        self._inbox.append(("trained", (origin_worker, batch_id, records)))
        self._wake()

    def overflow_ready(self) -> None:
        self._wake()

    def _wake(self) -> None:
        if self._wake_pending or self._wake_w < 0:
            return
        self._wake_pending = True
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wake_w, b"\x01")

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
        poller.register(self._wake_r, zmq.POLLIN)
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
            if self._pending:
                first = next(iter(self._pending.values()))
                timeout_s = min(timeout_s, first.sent_at + self._settings.ack_timeout_s - now)
            ready = dict(poller.poll(max(int(timeout_s * 1000), 0) + 1))
            if self._wake_r in ready:
                self._wake_pending = False
                with contextlib.suppress(BlockingIOError):
                    os.read(self._wake_r, 4096)
            self._drain_inbox(sockets)
            if sockets.router in ready:
                self._read_router(sockets)
            if sockets.sub in ready:
                self._read_events(sockets)
            for worker, socket in list(sockets.dealers.items()):
                if socket in ready:
                    self._read_dealer(worker, socket)
            sockets.handle_security(ready, self._counters.values)
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
        for batch_id in [b for b, f in self._pending.items() if f.receiver == worker_id]:
            flight = self._pending.pop(batch_id)
            self._unit.return_overflow(flight.columns)
            self._counters.values["batches_rerouted_on_leave"] += 1

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
            self._batch_ids += 1
            batch_id = f"{self._incarnation:x}-{self._batch_ids}"
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
            self._pending[batch_id] = _InFlight(receiver, columns, now)
            values = self._counters.values
            values["batches_sent"] += 1
            values["records_sent"] += len(columns)
            values["bytes_sent"] += len(frame)

    def _expire(self, now: float) -> None:
        timeout_s = self._settings.ack_timeout_s
        while self._pending:
            batch_id, flight = next(iter(self._pending.items()))
            if now - flight.sent_at < timeout_s:
                return
            del self._pending[batch_id]
            # The receiver may never have admitted the batch (it dropped a frame from a
            # peer it did not know yet): without the refund its credit would be gone for
            # good. If it did admit it, its ledger rejects whatever goes beyond its window.
            self._receivers.refund(flight.receiver, len(flight.columns))
            self._receivers.suppress(flight.receiver, now + 2 * timeout_s)
            self._unit.return_overflow(flight.columns)
            self._counters.values["batches_timed_out"] += 1

    def _publish(self, sockets: PeerSockets, state: WorkerStateEvent.State) -> None:
        receiving, queue_records, sequence = self._unit.receiver_state()
        if state in (WorkerStateEvent.RECEIVING, WorkerStateEvent.NOT_RECEIVING):
            state = WorkerStateEvent.RECEIVING if receiving else WorkerStateEvent.NOT_RECEIVING
        event = WorkerStateEvent(
            job=self._settings.job,
            worker_id=self._settings.worker_id,
            state=state,
            sequence=sequence,
            queue_length=queue_records,
            emitted_at_ms=time.time_ns() // 1_000_000,
        )
        try:
            sockets.pub.send_multipart([codec.KIND_STATE, wire.encode(event)], flags=zmq.NOBLOCK)
            self._counters.values["events_sent"] += 1
        except zmq.Again:
            pass

    def _publish_state(self, sockets: PeerSockets) -> None:
        self._publish(sockets, WorkerStateEvent.RECEIVING)

    def _drain_inbox(self, sockets: PeerSockets) -> None:
        published = False
        while self._inbox:
            kind, payload = self._inbox.popleft()
            if kind == "state" and not published:
                self._publish_state(sockets)  # the current state covers every queued one
                published = True
            elif kind == "trained":
                origin, batch_id, records = payload
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
        ack = BatchAck(
            job=self._settings.job,
            batch_id=batch_id,
            receiver_worker=self._settings.worker_id,
            status=status,
            reason=reason,
            acked_at_ms=time.time_ns() // 1_000_000,
        )
        self._to_peer(sockets, origin, codec.KIND_ACK, wire.encode(ack))

    def _grant(self, sockets: PeerSockets, sender: str, records: int) -> None:
        grant = CreditGrant(
            job=self._settings.job,
            receiver_worker=self._settings.worker_id,
            sender_worker=sender,
            credit_records=records,
        )
        self._to_peer(sockets, sender, codec.KIND_CREDIT, wire.encode(grant))

    def _to_peer(self, sockets: PeerSockets, worker: str, kind: bytes, payload: bytes) -> None:
        try:
            sockets.router.send_multipart([worker.encode(), kind, payload], flags=zmq.NOBLOCK)
        except zmq.Again:
            # the sender's pipe is full or gone: it times the batch out and re-routes it
            self._counters.values["control_send_failures"] += 1

    # receiving -------------------------------------------------------------------------

    def _read_router(self, sockets: PeerSockets) -> None:
        values = self._counters.values
        for _ in range(_MAX_FRAMES_PER_ROUND):
            try:
                frames = sockets.router.recv_multipart(flags=zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            if len(frames) != 3 or frames[1].bytes != codec.KIND_BATCH:
                values["malformed_frames_dropped"] += 1
                continue
            sender = frames[0].bytes.decode("utf-8", errors="replace")
            if sender not in self._members:
                values["unknown_peer_frames_dropped"] += 1
                self._refuse_unknown(sockets, sender, frames[2].buffer)
                continue
            if self._settings.curve is not None and frames[1].get("User-Id") != sender:
                values["unknown_peer_frames_dropped"] += 1
                continue
            try:
                batch = codec.decode_batch(frames[2].buffer)
            except SchemaError:
                values["malformed_frames_dropped"] += 1
                continue
            if batch.origin_worker != sender or batch.job != self._settings.job:
                values["unknown_peer_frames_dropped"] += 1
                continue
            records = len(batch.columns)
            if not self._ledger.admit(sender, records):
                values["credit_violations"] += 1
                self._answer(sockets, sender, batch.batch_id, BatchAck.REJECTED, "no credit")
            elif self._unit.deliver_remote(sender, batch.batch_id, batch.columns):
                values["batches_received"] += 1
                values["records_received"] += records
                values["bytes_received"] += len(frames[2].buffer)
            else:
                self._ledger.release(sender, records)  # the sender refunds a rejected batch
                values["batches_refused"] += 1
                self._answer(sockets, sender, batch.batch_id, BatchAck.REJECTED, "not receiving")

    def _refuse_unknown(self, sockets: PeerSockets, sender: str, payload: memoryview) -> None:
        """A batch from a peer not (yet) in our membership: say REJECTED, so the sender
        refunds and retries shortly instead of waiting out its ACK timeout (it may have
        learned of us before we learned of it). Nothing of the batch is kept."""
        try:
            batch = codec.decode_batch(payload)
        except SchemaError:
            return
        if batch.origin_worker == sender and batch.job == self._settings.job:
            self._answer(sockets, sender, batch.batch_id, BatchAck.REJECTED, "unknown peer")

    def _read_dealer(self, receiver: str, socket: zmq.Socket[bytes]) -> None:
        values = self._counters.values
        for _ in range(_MAX_FRAMES_PER_ROUND):
            try:
                frames = socket.recv_multipart(flags=zmq.NOBLOCK)
            except zmq.Again:
                return
            if len(frames) != 2:
                values["malformed_frames_dropped"] += 1
                continue
            try:
                message = codec.decode_control(frames[0], frames[1])
            except SchemaError:
                values["malformed_frames_dropped"] += 1
                continue
            if isinstance(message, BatchAck):
                self._on_ack(receiver, message)
            elif isinstance(message, CreditGrant) and message.receiver_worker == receiver:
                self._receivers.on_credit(receiver, int(message.credit_records))
            else:
                values["malformed_frames_dropped"] += 1

    def _on_ack(self, receiver: str, ack: BatchAck) -> None:
        values = self._counters.values
        flight = self._pending.get(ack.batch_id)
        if flight is None or flight.receiver != receiver or ack.receiver_worker != receiver:
            values["late_acks"] += 1
            if ack.status == BatchAck.ACKED:
                self._receivers.unsuppress(receiver)  # it is alive after all
            return
        del self._pending[ack.batch_id]
        if ack.status == BatchAck.ACKED:
            self._unit.ack_forwarded(flight.columns)
            values["batches_acked"] += 1
            values["records_acked"] += len(flight.columns)
            self._counters.add_rtt((time.monotonic() - flight.sent_at) * 1000.0)
        else:
            values["batches_rejected"] += 1
            self._receivers.refund(receiver, len(flight.columns))
            self._receivers.suppress(receiver, time.monotonic() + _REJECT_BACKOFF_S)
            self._unit.return_overflow(flight.columns)

    def _read_events(self, sockets: PeerSockets) -> None:
        values = self._counters.values
        for _ in range(_MAX_FRAMES_PER_ROUND):
            try:
                frames = sockets.sub.recv_multipart(flags=zmq.NOBLOCK)
            except zmq.Again:
                return
            if len(frames) != 2 or frames[0] != codec.KIND_STATE:
                values["malformed_frames_dropped"] += 1
                continue
            try:
                event = codec.decode_control(frames[0], frames[1])
            except SchemaError:
                values["malformed_frames_dropped"] += 1
                continue
            assert isinstance(event, WorkerStateEvent)  # noqa: S101 - KIND_STATE decodes to it
            if event.job != self._settings.job or event.worker_id not in self._members:
                values["unknown_peer_frames_dropped"] += 1
                continue
            values["events_received"] += 1
            if event.state == WorkerStateEvent.LEFT:
                self._receivers.on_left(event.worker_id)
                self._reroute_from(event.worker_id)
            elif event.state in (WorkerStateEvent.RECEIVING, WorkerStateEvent.NOT_RECEIVING):
                receiving = event.state == WorkerStateEvent.RECEIVING
                if not self._receivers.on_state(event.worker_id, receiving, event.sequence):
                    values["stale_events"] += 1
