"""Handing a dead shard worker's shards back at once, for the executor that saw it die.

Owned here: :class:`ShardRelease`. A shard worker (``--assignment shards``) killed
outright sends no last ``leaving`` update, so the control app puts its shards back in
the queue only when their lease runs out (``--shard-lease-s``, stretched by the heartbeat
interval): in ``streamtrain demo --kill-worker-at 120`` that stall (6 s, 14 simulated
minutes) was what raised the lag fallback in both kill runs. The executor that saw the
process exit sends that update for it: a ``ShardUpdate`` with ``leaving`` set on
``<job>.shards``, flushed before the replacement starts, so on that one-partition topic
it comes before anything the replacement (which has the same worker id) asks for.

If the send fails the lease still requeues the shards; a worker that was not dead after
all reports shards it no longer holds, and the control app refuses those reports (its
records are trained again by the next holder: at-least-once, nothing lost).
"""

from __future__ import annotations

import logging

from confluent_kafka import KafkaException, Producer

from streamtrain import wire
from streamtrain.config import KafkaSettings
from streamtrain.proto import control_plane_pb2 as pb
from streamtrain.shards.messages import default_topics
from streamtrain.units import now_ms

__all__ = ["ShardRelease"]

log = logging.getLogger(__name__)


class ShardRelease:
    """Sends ``leaving`` for the workers of shard job ``job`` that died (module docstring)."""

    def __init__(self, kafka: KafkaSettings, job: str, timeout_s: float = 5.0) -> None:
        self.kafka = kafka
        self.job = job
        self.timeout_s = timeout_s
        self.topic = default_topics(job)[0]
        self.sent = 0
        self._producer: Producer | None = None

    def worker_gone(self, worker_id: str) -> bool:
        """Tell the control app that ``worker_id`` is gone; whether the broker took it."""
        update = pb.ShardUpdate(
            job=self.job,
            worker_id=worker_id,
            leaving=True,
            sent_at_ms=now_ms(),
        )
        errors: list[str] = []

        def delivered(error: object, _message: object) -> None:
            if error is not None:
                errors.append(str(error))

        try:
            if self._producer is None:
                self._producer = Producer(self.kafka.confluent_config())
            self._producer.produce(
                self.topic, key=worker_id.encode(), value=wire.encode(update), on_delivery=delivered
            )
            if self._producer.flush(self.timeout_s):
                errors.append(f"not delivered within {self.timeout_s:g} s")
        except (KafkaException, BufferError) as exc:
            errors.append(str(exc))
        if errors:
            reason = "; ".join(errors)
            log.warning(
                "could not hand back the shards of dead worker %s (%s); their lease runs out",
                worker_id,
                reason,
            )
            return False
        self.sent += 1
        log.info("handed back the shards of dead worker %s", worker_id)
        return True

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(self.timeout_s)
            self._producer = None
