"""The faults of ``benchmarks/chaos.py``: a seeded schedule, a relay that can stall, a
worker stopped and woken.

Owned here:

* :func:`schedule`: the seeded fault schedule, ``(at_s, kind)`` pairs. The kinds of a
  job whose workers share partitions through the shuffle are :data:`KINDS`:
  ``kill_sender`` / ``kill_receiver`` (kill -9 a worker that forwards / one that
  receives forwarded records; restarted after a pause), ``broker`` (kill -9 the durable
  broker, restart it on the same port after ``broker_down_s``), ``control`` (kill -9 the
  control app, start it again), ``partition`` (stall all traffic to one shuffle peer's
  endpoints for 30 s). A job on leased shards has :data:`SHARD_KINDS`: ``kill_worker``
  (kill -9 a worker holding shards, restarted after a pause), ``stall_worker`` (SIGSTOP a
  worker for three of its leases, then SIGCONT: its shards go to others, and it wakes up
  holding records of shards it no longer holds), ``broker`` and ``control``. Every kind
  comes once per cycle in a seeded order; the gaps are seeded too; nothing starts in the
  last ``quiet_s`` of the run.
* :class:`StallingRelay`: TCP relays from ``relay_host:port`` to ``target_host:port``
  for the ports it is told (the victim worker binds ``target_host`` and announces
  ``relay_host``, so every peer reaches it through the relay). ``stall(seconds)`` stops
  moving bytes both ways on every relayed connection, as a network that drops the
  peer's packets does: TCP keeps the bytes and retransmits, nothing reaches the other
  end until the stall ends. :func:`watch_victim` tells it the ports the victim worker
  announces (a restart's too).
* :func:`stall`: SIGSTOP a child for a while, then SIGCONT (``stall_worker``).
"""

from __future__ import annotations

import contextlib
import random
import signal
import socket
import threading
import time
import uuid
from collections.abc import Iterable

from confluent_kafka import Consumer, TopicPartition

from benchmarks.chaos_job import Child
from streamtrain.config import KafkaSettings
from streamtrain.proto import data_plane_pb2 as dp

__all__ = ["KINDS", "SHARD_KINDS", "StallingRelay", "schedule", "stall", "watch_victim"]

KINDS = ("kill_sender", "kill_receiver", "broker", "control", "partition")
SHARD_KINDS = ("kill_worker", "stall_worker", "broker", "control")
PARTITION_S = 30.0


def schedule(
    duration_s: float,
    seed: int,
    *,
    first_s: float = 20.0,
    gap_s: tuple[float, float] = (25.0, 55.0),
    quiet_s: float = 45.0,
    once: bool = False,
    kinds: tuple[str, ...] = KINDS,
) -> list[tuple[float, str]]:
    """Seeded ``(at_s, kind)`` faults of ``kinds`` over ``duration_s`` (module
    docstring). With ``once`` every kind comes exactly once, evenly spread (the short
    test's run)."""
    rng = random.Random(seed)
    if once:
        order = list(kinds)
        rng.shuffle(order)
        span = max(1.0, duration_s - quiet_s - first_s)
        return [(first_s + span * i / len(order), kind) for i, kind in enumerate(order)]
    faults: list[tuple[float, str]] = []
    at_s = first_s
    cycle: list[str] = []
    while at_s < duration_s - quiet_s:
        if not cycle:
            cycle = list(kinds)
            rng.shuffle(cycle)
        kind = cycle.pop()
        faults.append((round(at_s, 1), kind))
        at_s += rng.uniform(*gap_s) + (PARTITION_S if kind == "partition" else 0.0)
    return faults


class StallingRelay:
    """See the module docstring. Threads only; ``close()`` ends every one."""

    def __init__(self, relay_host: str, target_host: str) -> None:
        self.relay_host, self.target_host = relay_host, target_host
        self._ports: set[int] = set()
        self._listeners: list[socket.socket] = []
        self._connections: list[socket.socket] = []
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = threading.Event()
        self._lock = threading.Lock()

    def relay(self, ports: Iterable[int]) -> None:
        """Listen on ``relay_host`` for each new port (ZeroMQ peers retry until it is)."""
        for port in ports:
            with self._lock:
                if port in self._ports:
                    continue
                listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                listener.bind((self.relay_host, port))
                listener.listen(64)
                listener.settimeout(0.5)
                self._ports.add(port)
                self._listeners.append(listener)
            threading.Thread(target=self._accept, args=(listener, port), daemon=True).start()

    def stall(self, seconds: float) -> None:
        """No byte moves either way for ``seconds`` (blocks the caller that long)."""
        self._flowing.clear()
        try:
            self._closed.wait(seconds)
        finally:
            self._flowing.set()

    def close(self) -> None:
        self._closed.set()
        self._flowing.set()
        with self._lock:
            for sock in self._listeners + self._connections:
                sock.close()

    def _accept(self, listener: socket.socket, port: int) -> None:
        while not self._closed.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                server = socket.create_connection((self.target_host, port), timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._connections += [client, server]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        source.settimeout(0.5)
        while not self._closed.is_set():
            self._flowing.wait()
            try:
                data = source.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
            if not data:
                break
            while not self._flowing.is_set() and not self._closed.is_set():
                time.sleep(0.05)  # a stall began mid-transfer: hold the bytes
            try:
                sink.sendall(data)
            except OSError:
                break
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def stall(child: Child, seconds: float) -> None:
    """SIGSTOP ``child`` for ``seconds``, then SIGCONT (its leases expire meanwhile)."""
    process = child.process
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGCONT)


def watch_victim(
    kafka: KafkaSettings, job: str, worker_id: str, relay: StallingRelay, stop: threading.Event
) -> None:
    """Relay every port the victim announces on ``<job>.members`` (a restart's too)."""
    consumer = Consumer(kafka.confluent_config(**{"group.id": f"chaos-{uuid.uuid4().hex}"}))
    consumer.assign([TopicPartition(f"{job}.members", 0, 0)])
    try:
        while not stop.is_set():
            for message in consumer.consume(100, 0.5):
                if message.error() is not None or not message.value():
                    continue
                member = dp.Member.FromString(message.value() or b"")
                if member.worker_id == worker_id:
                    ports = [
                        int(e.rsplit(":", 1)[1])
                        for e in (member.data_endpoint, member.event_endpoint)
                    ]
                    relay.relay(ports)
    finally:
        consumer.close()
