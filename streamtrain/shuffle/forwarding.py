"""The ForwardingUnit: one worker's ZeroMQ side of the shuffle, on its own thread.

The ForwardingUnit is responsible for:

* its sockets (:class:`~streamtrain.shuffle.sockets.PeerSockets`), all created, used and
  closed on its one thread; its state is broadcast on every transition and every
  ``state_rebroadcast_ms`` (late subscribers catch up, and peers hear that it is alive);
* draining the ShuffleUnit's overflow to receivers within their credit;
* the brpc-style stream semantics (:class:`~streamtrain.shuffle.inflight.InFlightBatches`):
  a forwarded batch is acknowledged to the offset tracker only when the receiver's ACK
  arrives;
* the receiver side: every frame checked (:mod:`~streamtrain.shuffle.frames`), counted
  (:class:`~streamtrain.shuffle.stats.ForwardingCounters`) and answered;
* connecting only to peers whose sockets can be set up, in the dialect of a peer's
  release (:mod:`~streamtrain.shuffle.legacy`: a rolling upgrade).

If its thread stops on an error, :attr:`ForwardingUnit.failure` says why (also when the
thread ended without one), so the worker fails loudly instead of waiting for ACKs that
can no longer come. The decisions live in pure collaborators (``receivers``,
``inflight``, ``frames``, ``unit``); this module is their socket thread. It never blocks
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
    BatchRefusal,
    Drop,
    check_batch,
    check_control,
    check_event,
    sender_of,
)
from streamtrain.shuffle.inflight import InFlightBatches
from streamtrain.shuffle.legacy import LegacyDialer, batch_version, plain_sender
from streamtrain.shuffle.mailbox import Mailbox
from streamtrain.shuffle.membership import Membership, PeerInfo, new_incarnation
from streamtrain.shuffle.receivers import CreditLedger, ReceiverList
from streamtrain.shuffle.replies import Replies
from streamtrain.shuffle.settings import ShuffleSettings
from streamtrain.shuffle.sockets import PeerSockets
from streamtrain.shuffle.stats import Counters, ForwardingStats
from streamtrain.shuffle.unit import ShuffleUnit
from streamtrain.units import NS_PER_MS, ms_to_s, s_to_ms

__all__ = ["ForwardingStats", "ForwardingUnit"]

_LOG = logging.getLogger(__name__)
_MEMBERSHIP_SYNC_S = 0.1
_REJECT_BACKOFF_S = 0.05
_ANSWER_RETRY_S = 0.05  # how soon answers that could not go are tried again
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
        settings = self._settings
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
        self._in_flight = InFlightBatches(
            self._incarnation, settings.ack_timeout_s, settings.max_queued_s
        )
        self._members: dict[str, PeerInfo] = {}
        self._members_by_key: dict[bytes, str] = {}
        self._replies = Replies(
            settings.job, settings.worker_id, settings.ack_timeout_s, self._count
        )
        self._dialer = LegacyDialer()  # how this worker reaches receivers of older releases

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
        if not self._ready.wait(timeout_s) or self._me is None or self._failure is not None:
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
                if self._thread.is_alive():
                    _LOG.error(
                        "forwarding thread of %s did not stop within %g s",
                        self._settings.worker_id,
                        timeout_s,
                    )
                self._thread = None
            self._mailbox.close()

    def __enter__(self) -> ForwardingUnit:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    @property
    def failure(self) -> BaseException | None:
        """Why the unit's thread stopped while it should run (``None``: it runs, or was
        stopped)."""
        if self._failure is not None:
            return self._failure
        thread = self._thread
        if thread is not None and not thread.is_alive() and not self._stop.is_set():
            return StreamtrainError(
                f"the forwarding thread of {self._settings.worker_id} ended unexpectedly"
            )
        return None

    def known_peers(self) -> list[str]:
        """The peers the unit's thread currently connects to, by worker id."""
        return sorted(self._members)

    def stats(self) -> ForwardingStats:
        return self._counters.snapshot(len(self._in_flight))

    # the thread ------------------------------------------------------------------------

    def _run(self) -> None:
        sockets: PeerSockets | None = None
        try:
            sockets = PeerSockets(self._settings, self._dialer)
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
            self._failure = exc  # before closing: nobody must wait on a dead thread
            _LOG.exception("forwarding unit of %s failed", self._settings.worker_id)
        finally:
            self._ready.set()
            if sockets is not None:
                try:
                    sockets.close()
                except zmq.ZMQError:
                    _LOG.exception("closing the shuffle sockets of %s", self._settings.worker_id)

    def _loop(self, sockets: PeerSockets) -> None:
        poller = zmq.Poller()
        poller.register(sockets.router, zmq.POLLIN)
        poller.register(self._mailbox.fd, zmq.POLLIN)
        for extra in sockets.extra_readers():
            poller.register(extra, zmq.POLLIN)
        self._publish(sockets, WorkerStateEvent.JOINED)
        next_sync = next_broadcast = 0.0
        heard_at = self._receivers.heard_at
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_sync:
                self._sync_members(sockets, poller)
                next_sync = now + _MEMBERSHIP_SYNC_S
            if now >= next_broadcast:
                self._publish_state(sockets)
                next_broadcast = now + ms_to_s(self._settings.state_rebroadcast_ms)
            self._expire(sockets, poller, now)
            self._forward(sockets)
            self._replies.resend(sockets.router, self._members, now)
            timeout_s = min(next_sync, next_broadcast) - time.monotonic()
            deadline = self._in_flight.next_deadline(heard_at)
            if deadline is not None:
                timeout_s = min(timeout_s, deadline - now)
            if self._replies.pending:  # retries, and RECEIVED answers deferred
                timeout_s = min(timeout_s, _ANSWER_RETRY_S)
            ready = dict(poller.poll(max(int(s_to_ms(timeout_s)), 0) + 1))
            if self._mailbox.fd in ready:
                self._mailbox.woken()
            self._answer_mailbox(sockets)
            if sockets.router in ready:
                self._read_router(sockets)
            for worker, sub in list(sockets.subs.items()):
                if sub in ready:
                    self._read_events(worker, sub)
            for worker, dealer in list(sockets.dealers.items()):
                if dealer in ready:
                    self._read_dealer(worker, dealer)
            sockets.handle_security(ready, self._count)
        self._publish(sockets, WorkerStateEvent.LEFT)

    # membership ------------------------------------------------------------------------

    def _sync_members(self, sockets: PeerSockets, poller: zmq.Poller) -> None:
        """Per peer a DEALER for batches out and a SUB for its events; a peer whose
        address or key libzmq refuses is left out (logged, counted, tried again later);
        a peer that leaves gets its batches re-routed at once."""
        try:
            members = dict(self._membership.peers())
        except StreamtrainError as exc:
            _LOG.warning("membership view unavailable, keeping the last one: %s", exc)
            return
        if self._settings.curve is not None:
            members = {w: p for w, p in members.items() if p.curve_public_key is not None}
        now = time.monotonic()
        members = {w: p for w, p in members.items() if not sockets.refused_recently(p, now)}
        diff = self._receivers.sync(members)
        for info in diff.removed:
            sockets.disconnect(info.worker_id, poller)
            self._ledger.reset(info.worker_id)
            self._reroute_from(info.worker_id)
        unreachable = [info for info in diff.added if not sockets.connect(info, poller, now)]
        for info in unreachable:
            self._count.peers_unreachable += 1
            del members[info.worker_id]
        if unreachable:
            self._receivers.sync(members)
        self._members = members
        self._members_by_key = {
            p.curve_public_key: w for w, p in members.items() if p.curve_public_key is not None
        }
        self._replies.keep_only(members)
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
        """Drain the overflow: a receiver drawn uniformly from the available list, at most
        the credit it has left (the window less the records in flight to it: ACK-clocked,
        so no lost message can leak credit), one batch at a time, cut to fit a frame."""
        settings = self._settings
        for _ in range(_MAX_FRAMES_PER_ROUND):
            if not self._unit.has_overflow():
                return
            now = time.monotonic()
            in_flight = self._in_flight.records_to()
            receiver = self._receivers.choose(now, settings.policy, in_flight)
            if receiver is None:
                return
            budget = min(
                settings.batch_records,
                self._receivers.credit(receiver, in_flight.get(receiver, 0)),
            )
            resent_before = self._unit.resent_records_popped
            columns = self._unit.pop_overflow(budget, settings.max_frame_bytes)
            if columns is None:
                return
            resent = self._unit.resent_records_popped - resent_before
            batch_id = self._in_flight.next_id()
            frame = codec.encode_batch(
                columns,
                job=settings.job,
                batch_id=batch_id,
                origin_worker=settings.worker_id,
                sent_at_ms=time.time_ns() // NS_PER_MS,
                version=batch_version(self._members.get(receiver)),
            )
            try:
                dealer = sockets.dealers[receiver]  # copied: pyzmq's zero-copy is slower
                dealer.send_multipart([codec.KIND_BATCH, frame], flags=zmq.NOBLOCK)
            except zmq.ZMQError:  # EAGAIN: not connected yet, or its pipe is full
                self._unit.unpop_overflow(columns, resent)
                self._receivers.suppress(receiver, now + _REJECT_BACKOFF_S)
                continue
            self._in_flight.sent(batch_id, receiver, columns, now)
            self._count.count_sent(len(columns), len(frame), resent)

    def _expire(self, sockets: PeerSockets, poller: zmq.Poller, now: float) -> None:
        """Once the receiver answered RECEIVED the ACK timeout measures its silence, not
        the wait in its queue; a timed-out batch goes back in front of the overflow and
        the receiver is set aside for a while (as after a rejection)."""
        for flight in self._in_flight.expired(now, self._receivers.heard_at):
            self._unit.return_overflow(flight.columns)
            self._count.batches_timed_out += 1
            peer = self._members.get(flight.receiver)
            # an older release may have dropped it for its routing id: then the other kind
            if peer is None or not sockets.timed_out(peer, flight.sent_at, now, poller):
                self._receivers.suppress(flight.receiver, now + 2 * self._settings.ack_timeout_s)

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
            at_ms=time.time_ns() // NS_PER_MS,
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
            self._ledger.trained(origin, records)
            self._replies.send(sockets.router, origin, batch_id, BatchAck.ACKED)
            self._replies.grant(sockets.router, origin, records)  # first-release senders

    # receiving -------------------------------------------------------------------------

    def _read_router(self, sockets: PeerSockets) -> None:
        """Batches in: a batch it cannot take but may answer is answered REJECTED at once;
        answers go back on the routing id the batch came with
        (:class:`~streamtrain.shuffle.replies.Replies`)."""
        settings = self._settings
        curve = settings.curve is not None
        for _ in range(_MAX_FRAMES_PER_ROUND):
            try:
                frames = sockets.router.recv_multipart(flags=zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            route = frames[0].bytes
            sender = sender_of(route)
            plain = sender is None and (sender := plain_sender(route, self._members)) is not None
            if len(frames) != 3 or frames[1].bytes != codec.KIND_BATCH or sender is None:
                self._count.dropped(Drop.MALFORMED)
                continue
            payload = frames[2].buffer
            user_id = frames[2].get("User-Id") if curve else None
            topics = settings.topics or None
            batch = check_batch(
                sender,
                payload,
                members=self._members,
                job=settings.job,
                curve=curve,
                user_id=user_id,
                topics=topics,
            )
            if isinstance(batch, BatchRefusal):
                self._count.dropped(batch.why)
                answer = (batch.batch_id, BatchAck.REJECTED, batch.reason)
                self._replies.send(sockets.router, sender, *answer, route=route)
                continue
            if isinstance(batch, Drop):
                self._count.dropped(batch)
                continue
            self._replies.remember(sender, route, plain=plain)
            self._take(sockets, sender, batch, len(payload))

    def _take(
        self, sockets: PeerSockets, sender: str, batch: codec.DecodedBatch, size: int
    ) -> None:
        records = len(batch.columns)
        if self._unit.holds_remote(sender, batch.batch_id):
            status, reason = BatchAck.RECEIVED, ""  # the same frame twice: queued once
        elif not self._ledger.admit(sender, records):
            self._count.credit_violations += 1
            status, reason = BatchAck.REJECTED, "no credit"
        elif self._unit.deliver_remote(sender, batch.batch_id, batch.columns):
            self._count.batches_received += 1
            self._count.records_received += records
            self._count.bytes_received += size
            self._replies.received(sender, batch.batch_id, time.monotonic())  # deferred
            return
        else:
            self._ledger.release(sender, records)
            self._count.batches_refused += 1
            status, reason = BatchAck.REJECTED, "not receiving"
        self._replies.send(sockets.router, sender, batch.batch_id, status, reason)

    def _read_dealer(self, receiver: str, socket: zmq.Socket[bytes]) -> None:
        for _ in range(_MAX_FRAMES_PER_ROUND):
            try:
                message = check_control(socket.recv_multipart(flags=zmq.NOBLOCK), receiver)
            except zmq.Again:
                return
            if isinstance(message, Drop):
                self._count.dropped(message)
                continue
            now = time.monotonic()
            self._receivers.heard(receiver, now)
            self._dialer.answered(receiver, now)  # the dialect it is spoken to works
            if isinstance(message, BatchAck):
                self._on_ack(receiver, message)
            # a CreditGrant comes from an older worker: credit is ACK-clocked, nothing to do

    def _on_ack(self, receiver: str, ack: BatchAck) -> None:
        now = time.monotonic()
        if ack.status == BatchAck.RECEIVED:
            if not self._in_flight.received(ack.batch_id, receiver, now):
                self._count.late_acks += 1
            return
        flight = self._in_flight.answered(ack.batch_id, receiver)
        if flight is None:
            self._count.late_acks += 1
            if ack.status == BatchAck.ACKED:
                self._receivers.unsuppress(receiver)  # it is alive after all
            return
        if ack.status == BatchAck.ACKED:
            self._unit.ack_forwarded(flight.columns)
            self._count.batches_acked += 1
            self._count.records_acked += len(flight.columns)
            self._counters.add_rtt(s_to_ms(now - flight.sent_at))
        else:
            self._count.batches_rejected += 1
            self._receivers.suppress(receiver, now + _REJECT_BACKOFF_S)
            self._unit.return_overflow(flight.columns)

    def _read_events(self, peer: str, socket: zmq.Socket[bytes]) -> None:
        for _ in range(_MAX_FRAMES_PER_ROUND):
            try:
                frames = socket.recv_multipart(flags=zmq.NOBLOCK)
            except zmq.Again:
                return
            event = check_event(frames, peer=peer, job=self._settings.job)
            if isinstance(event, Drop):
                self._count.dropped(event)
                continue
            self._receivers.heard(peer, time.monotonic())
            self._count.events_received += 1
            if event.state == WorkerStateEvent.LEFT:
                self._receivers.on_left(peer)
                self._reroute_from(peer)
            elif event.state in (WorkerStateEvent.RECEIVING, WorkerStateEvent.NOT_RECEIVING):
                receiving = event.state == WorkerStateEvent.RECEIVING
                if not self._receivers.on_state(peer, receiving, event.sequence):
                    self._count.stale_events += 1
