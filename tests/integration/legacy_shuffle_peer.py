"""A shuffle peer of the first release (before nonce routing ids and columnar batches),
for rolling-upgrade tests: its wire behaviour copied from that release's code, nothing
imported from today's shuffle code.

What it does as that release did:

* batches in the version-1 form: the columns as repeated fields, the payloads appended
  after them, ``schema_version`` 1; a frame of a newer version does not decode (the
  release's ``wire.decode`` refused versions above 1) and is dropped without an answer;
* its DEALER connects with its bare worker id as routing id, and its ROUTER names a
  sender by the bare routing id, answering on it;
* as a sender: credit starts at the window, each batch spends it, only a
  ``CreditGrant`` (or a refund) brings it back; any answer but ACKED is a rejection
  (refund, send the batch again), as is an ACK timeout;
* as a receiver: a ledger per sender admits a batch within ``outstanding + ungranted``
  of the window, answers ACKED once trained and grants the trained records back in
  coalesced grants of at least a quarter window (or when nothing is outstanding);
* it broadcasts RECEIVING on its PUB and reads the other worker's state on a SUB.

``routed=True`` makes it the routed release instead (still version-1 batches and
no ``batch_schema_version``): routing ids of worker id, NUL and nonce, RECEIVED before
ACKED (it keeps waiting), credit that comes back with each answer, no grants sent.

The peer runs on its own thread with its own context; every record it trained and every
answer it got is recorded for the test to check.
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import zmq

from streamtrain.proto.data_plane_pb2 import BatchAck, CreditGrant, RecordBatch, WorkerStateEvent
from streamtrain.shuffle.membership import PeerInfo

KIND_BATCH, KIND_ACK, KIND_CREDIT, KIND_STATE = b"B", b"A", b"C", b"S"
_PAYLOADS_TAG = bytes([(10 << 3) | 2])


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def encode_v1(job, batch_id, origin, topic, offsets, payloads) -> bytes:
    """The first release's ``encode_batch``: repeated fields, payloads appended last."""
    header = RecordBatch(
        schema_version=1,
        job=job,
        batch_id=batch_id,
        origin_worker=origin,
        topic=topic,
        partitions=[0] * len(offsets),
        offsets=offsets,
        timestamps_ms=[0] * len(offsets),
        payload_lengths=[len(p) for p in payloads],
        forwarded=True,
        sent_at_ms=int(time.time() * 1000),
    ).SerializeToString()
    blob = b"".join(payloads)
    return b"".join((header, _PAYLOADS_TAG, _varint(len(blob)), blob))


def decode_v1(data: bytes) -> RecordBatch | None:
    """The first release's reading: parse, refuse a newer version, check the columns."""
    message = RecordBatch()
    try:
        message.ParseFromString(data)
    except Exception:  # noqa: BLE001 - the release dropped anything that did not parse
        return None
    n = len(message.offsets)
    if message.schema_version > 1 or n == 0 or len(message.payload_lengths) != n:
        return None
    if sum(message.payload_lengths) != len(message.payloads):
        return None
    return message


@dataclass
class _Account:
    outstanding: int = 0
    ungranted: int = 0


@dataclass
class LegacyPeer:
    """One first-release worker (see the module docstring)."""

    job: str
    worker: str
    window_records: int = 200
    routed: bool = False
    ack_timeout_s: float = 3.0
    trained: list[int] = field(default_factory=list)  # offsets trained here, in order
    acked: set[int] = field(default_factory=set)  # offsets the other side ACKed
    answers: collections.Counter[str] = field(default_factory=collections.Counter)
    reasons: collections.Counter[str] = field(default_factory=collections.Counter)
    dropped_frames: int = 0
    newer_frames: int = 0
    grants_received: int = 0

    def __post_init__(self) -> None:
        self.context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.router = self.context.socket(zmq.ROUTER)
        self.pub = self.context.socket(zmq.PUB)
        for socket in (self.router, self.pub):
            socket.linger = 0
        self.data_port = self.router.bind_to_random_port("tcp://127.0.0.1")
        self.event_port = self.pub.bind_to_random_port("tcp://127.0.0.1")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._outbox: collections.deque[list[int]] = collections.deque()
        self._in_flight: dict[str, tuple[list[int], float]] = {}
        self._credit = self.window_records
        self._ledger: dict[str, _Account] = {}
        self._peer: PeerInfo | None = None
        self._peer_receiving = False
        self._sent = 0

    @property
    def info(self) -> PeerInfo:
        """How it is announced: an older release announces no batch schema version."""
        return PeerInfo(
            self.worker,
            f"tcp://127.0.0.1:{self.data_port}",
            f"tcp://127.0.0.1:{self.event_port}",
            incarnation=1,
            batch_schema_version=1,
        )

    def connect(self, peer: PeerInfo) -> None:
        self._peer = peer

    def send(self, offsets: list[int], batch_records: int) -> None:
        """Queue ``offsets`` (topic ``t``, partition 0) to forward to the connected peer."""
        for start in range(0, len(offsets), batch_records):
            self._outbox.append(offsets[start : start + batch_records])

    @property
    def unsent(self) -> int:
        return sum(map(len, self._outbox)) + sum(len(o) for o, _ in self._in_flight.values())

    def __enter__(self) -> LegacyPeer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.context.destroy(linger=0)

    # the thread ------------------------------------------------------------------------

    def _run(self) -> None:
        assert self._peer is not None
        dealer = self.context.socket(zmq.DEALER)
        dealer.linger = 0
        # the first release: the bare worker id; the routed one: worker id, NUL, nonce
        dealer.routing_id = self.worker.encode() + (b"\x00legacy-nonce" if self.routed else b"")
        dealer.connect(self._peer.data_endpoint)
        sub = self.context.socket(zmq.SUB)
        sub.linger = 0
        sub.setsockopt(zmq.SUBSCRIBE, KIND_STATE)
        sub.connect(self._peer.event_endpoint)
        poller = zmq.Poller()
        for socket in (self.router, dealer, sub):
            poller.register(socket, zmq.POLLIN)
        try:
            self._loop(poller, dealer, sub)
        finally:
            dealer.close(linger=0)
            sub.close(linger=0)

    def _loop(self, poller: zmq.Poller, dealer: zmq.Socket[bytes], sub: zmq.Socket[bytes]) -> None:
        sequence, next_state = 0, 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_state:
                sequence += 1
                event = WorkerStateEvent(
                    schema_version=1,
                    job=self.job,
                    worker_id=self.worker,
                    state=WorkerStateEvent.RECEIVING,
                    sequence=sequence,
                )
                self.pub.send_multipart([KIND_STATE, event.SerializeToString()])
                next_state = now + 0.1
            self._expire(now)
            self._forward(dealer)
            ready = dict(poller.poll(20))
            if self.router in ready:
                self._receive()
            if dealer in ready:
                self._answers(dealer)
            if sub in ready:
                self._events(sub)

    def _forward(self, dealer: zmq.Socket[bytes]) -> None:
        while self._outbox and self._peer_receiving and self._credit >= len(self._outbox[0]):
            offsets = self._outbox.popleft()
            self._sent += 1
            batch_id = f"old-{self._sent}"
            payloads = [f"record-{o}".encode() for o in offsets]
            frame = encode_v1(self.job, batch_id, self.worker, "t", offsets, payloads)
            dealer.send_multipart([KIND_BATCH, frame])
            self._credit -= len(offsets)
            self._in_flight[batch_id] = (offsets, time.monotonic())

    def _expire(self, now: float) -> None:
        for batch_id, (offsets, sent_at) in list(self._in_flight.items()):
            if now - sent_at >= self.ack_timeout_s:
                del self._in_flight[batch_id]
                self._credit = min(self._credit + len(offsets), self.window_records)
                self._outbox.appendleft(offsets)
                self.answers["timeout"] += 1

    def _answers(self, dealer: zmq.Socket[bytes]) -> None:
        while True:
            try:
                kind, payload = dealer.recv_multipart(flags=zmq.NOBLOCK)
            except zmq.Again:
                return
            if kind == KIND_CREDIT and self.routed:
                self.grants_received += 1  # the routed release ignores grants
                continue
            if kind == KIND_CREDIT:
                grant = CreditGrant()
                grant.ParseFromString(payload)
                self.grants_received += 1
                self._credit = min(self._credit + grant.credit_records, self.window_records)
                continue
            ack = BatchAck()
            ack.ParseFromString(payload)
            self.answers[BatchAck.Status.Name(ack.status)] += 1
            if ack.reason:
                self.reasons[ack.reason] += 1
            if self.routed and ack.status == BatchAck.RECEIVED:
                continue  # the routed release: queued there, keep waiting for ACKED
            flight = self._in_flight.pop(ack.batch_id, None)
            if flight is None:
                continue
            offsets, _ = flight
            if self.routed:  # credit is ACK-clocked: every answer frees the batch's
                self._credit = min(self._credit + len(offsets), self.window_records)
            if ack.status == BatchAck.ACKED:
                self.acked.update(offsets)
            else:  # the first release: anything but ACKED is a rejection
                if not self.routed:
                    self._credit = min(self._credit + len(offsets), self.window_records)
                self._outbox.appendleft(offsets)

    def _events(self, sub: zmq.Socket[bytes]) -> None:
        while True:
            try:
                _, payload = sub.recv_multipart(flags=zmq.NOBLOCK)
            except zmq.Again:
                return
            event = WorkerStateEvent()
            event.ParseFromString(payload)
            if event.schema_version <= 1 and event.state in (
                WorkerStateEvent.RECEIVING,
                WorkerStateEvent.NOT_RECEIVING,
            ):
                self._peer_receiving = event.state == WorkerStateEvent.RECEIVING

    def _receive(self) -> None:
        while True:
            try:
                route, kind, payload = self.router.recv_multipart(flags=zmq.NOBLOCK)
            except zmq.Again:
                return
            name, separator, _ = route.partition(b"\x00")
            if self.routed and not separator:
                self.dropped_frames += 1  # the routed release: a bare id is not a sender
                continue
            sender = (name if self.routed else route).decode("utf-8", errors="replace")
            header = RecordBatch()
            try:
                header.ParseFromString(payload)
            except Exception:  # noqa: BLE001
                header = RecordBatch()
            if header.schema_version > 1:
                self.newer_frames += 1
            message = decode_v1(payload) if kind == KIND_BATCH else None
            if message is None or self._peer is None or sender != self._peer.worker_id:
                self.dropped_frames += 1  # the first release: no answer to these
                continue
            account = self._ledger.setdefault(sender, _Account())
            records = len(message.offsets)
            if account.outstanding + account.ungranted + records > self.window_records:
                self._answer(route, message.batch_id, BatchAck.REJECTED, "no credit")
                continue
            account.outstanding += records
            if self.routed:
                self._answer(route, message.batch_id, BatchAck.RECEIVED, "")
            self.trained.extend(message.offsets)  # the trainer takes and acknowledges it
            payloads = np.frombuffer(message.payloads, dtype=np.uint8)
            assert payloads.size == sum(message.payload_lengths)
            self._answer(route, message.batch_id, BatchAck.ACKED, "")
            account.outstanding -= records
            if self.routed:
                continue  # the routed release sends no grants
            account.ungranted += records
            if account.ungranted >= max(self.window_records // 4, 1) or not account.outstanding:
                grant = CreditGrant(
                    schema_version=1,
                    job=self.job,
                    receiver_worker=self.worker,
                    sender_worker=sender,
                    credit_records=account.ungranted,
                )
                account.ungranted = 0
                self.router.send_multipart([route, KIND_CREDIT, grant.SerializeToString()])

    def _answer(self, route: bytes, batch_id: str, status: int, reason: str) -> None:
        ack = BatchAck(
            schema_version=1,
            job=self.job,
            batch_id=batch_id,
            receiver_worker=self.worker,
            status=status,  # type: ignore[arg-type]
            reason=reason,
        )
        self.router.send_multipart([route, KIND_ACK, ack.SerializeToString()])
