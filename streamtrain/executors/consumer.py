"""Applying ScaleCommands from Kafka: the consumer side of ``streamtrain scale apply``.

Owned here: :class:`CommandConsumer` reads ``ScaleCommand`` messages from the commands
topic (decoded with :mod:`streamtrain.wire`, never unpickled), keeps those for its job,
and applies each through a :class:`~streamtrain.executors.CommandApplier` (which
makes a redelivered command a no-op: idempotent on ``command_id``). Every result is
logged by the applier and passed to ``on_result``; a failed apply (a command created
in the future included) and a command too old to apply (``max_age_s`` after
``created_at_ms``, e.g. replayed from the start of the topic) each become an ``Alert``
on the alerts topic, so nothing is dropped silently. Undecodable messages (a null
value, a broken frame, a newer schema, an enum value this build does not know) are
counted by kind (:attr:`CommandConsumer.undecodable`); the first of each kind is
logged and alerted, so a topic full of one bad producer's messages is one alert.
Offsets are committed only after a message was handled, and every message is
handled: one that crashes its handling becomes an alert and is committed (it would
crash every restart again otherwise).
With ``outcomes_topic`` each applied command's ``ScaleOutcome`` (the job's assignment
mode, workers before and after, the executor's preparation time) is published there.

Synchronous (librdkafka's consumer and the executors block): run it in a thread or its
own process. ``start()`` connects, ``close()`` stops; ``poll(timeout_s)`` handles one
batch and returns its results, ``run(stop)`` loops until ``stop`` is set.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from streamtrain.config import KafkaSettings
from streamtrain.errors import ConfigError, KafkaError, SchemaError
from streamtrain.executors import ApplyResult, CommandApplier
from streamtrain.proto import control_plane_pb2 as cp
from streamtrain.units import ms_to_s, s_to_ms
from streamtrain.wire import DecodeFailures, decode, encode

__all__ = ["CommandConsumer", "ConsumerSettings", "Handled"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerSettings:
    job: str
    commands_topic: str = "streamtrain.scale.commands"
    alerts_topic: str | None = "streamtrain.lag.alerts"
    outcomes_topic: str | None = None  # ScaleOutcome per applied command (key: job)
    assignment: str = ""  # the job's --assignment, named in each ScaleOutcome
    group_id: str | None = None  # default: streamtrain-apply-<job>
    max_age_s: float = 900.0
    batch_size: int = 100
    consumer_config: tuple[tuple[str, str], ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.job:
            raise ConfigError("the applier needs a job")
        if self.max_age_s <= 0 or self.batch_size < 1:
            raise ConfigError("max_age_s and batch_size must be positive")

    @property
    def group(self) -> str:
        return self.group_id or f"streamtrain-apply-{self.job}"


@dataclass(frozen=True, slots=True)
class Handled:
    """One consumed message: its result when it was applied (or a duplicate), else why not."""

    offset: int
    result: ApplyResult | None
    skipped: str | None = None


class CommandConsumer:
    """See the module docstring. No I/O in ``__init__``."""

    def __init__(
        self,
        kafka: KafkaSettings,
        applier: CommandApplier,
        settings: ConsumerSettings,
        *,
        on_result: Callable[[ApplyResult], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.kafka = kafka
        self.applier = applier
        self.settings = settings
        self._on_result = on_result
        self._clock = clock
        self._consumer: Any = None
        self._producer: Any = None
        self.alerts_sent = 0
        self.undecodable = DecodeFailures("scale command", log)

    def start(self) -> CommandConsumer:
        from confluent_kafka import Consumer, KafkaException, Producer

        s = self.settings
        config = self.kafka.confluent_config(
            **{
                "group.id": s.group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                **dict(s.consumer_config),
            }
        )
        try:
            self._consumer = Consumer(config)
            self._consumer.subscribe([s.commands_topic])
            if s.alerts_topic or s.outcomes_topic:
                self._producer = Producer(self.kafka.confluent_config())
        except KafkaException as exc:
            raise KafkaError(f"cannot consume {s.commands_topic}: {exc}") from exc
        return self

    def close(self) -> None:
        if self._producer is not None:
            left = self._producer.flush(5.0)
            if left:
                log.warning("%d alert(s) not delivered before close", left)
            self._producer = None
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def __enter__(self) -> CommandConsumer:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def run(self, stop: threading.Event, poll_timeout_s: float = 1.0) -> None:
        while not stop.is_set():
            self.poll(poll_timeout_s)

    def poll(self, timeout_s: float = 1.0) -> list[Handled]:
        """Handle one batch of messages; commit after each handled one."""
        from confluent_kafka import KafkaException

        if self._consumer is None:
            raise ConfigError("start() the command consumer first")
        handled = []
        for message in self._consumer.consume(self.settings.batch_size, timeout=timeout_s):
            if message.error() is not None:
                log.warning("commands topic: %s", message.error())
                continue
            handled.append(self._handle_safely(message.value(), message.offset()))
            try:
                self._consumer.commit(message=message, asynchronous=False)
            except KafkaException as exc:  # redelivery is harmless: the applier dedupes
                log.warning("could not commit offset %d: %s", message.offset(), exc)
        if self._producer is not None:
            self._producer.poll(0)
        return handled

    def _handle_safely(self, value: bytes | None, offset: int) -> Handled:
        """:meth:`handle`, with any crash turned into an alert: the offset is committed
        whatever happened, so one bad command never crash-loops the applier."""
        try:
            return self.handle(value, offset)
        except Exception as exc:  # reported as an alert, then committed
            log.exception("scale command at offset %d crashed its handling", offset)
            why = f"scale command at offset {offset} not applied: {type(exc).__name__}: {exc}"
            self._alert(why, "failed")
            return Handled(offset, None, why)

    def handle(self, value: bytes | None, offset: int = -1) -> Handled:
        """One message's bytes: decode, filter, apply, report (see the module docstring)."""
        s = self.settings
        try:
            command = decode(cp.ScaleCommand, value)
        except SchemaError as exc:
            self.undecodable.add(exc, f"{s.commands_topic} offset {offset}")
            if self.undecodable.by_kind[exc.kind] == 1:
                self._alert(
                    f"undecodable scale command at offset {offset} ({exc.kind}; further ones "
                    f"of this kind are counted, not alerted): {exc}",
                    "rejected",
                    log_it=False,
                )
            return Handled(offset, None, str(exc))
        if command.job != s.job:
            return Handled(offset, None, f"for job {command.job!r}")
        age_s = self._clock() - ms_to_s(command.created_at_ms)
        if age_s > s.max_age_s:
            why = f"scale command {command.command_id} is {age_s:.0f} s old (> {s.max_age_s:g} s)"
            log.warning("%s; not applied", why)
            self._alert(why + "; not applied", "expired")
            return Handled(offset, None, why)
        result = self.applier.apply(command)
        if not result.ok:
            self._alert(
                f"scale command {command.command_id} to {command.target_workers} workers via "
                f"{result.executor} failed after {result.attempts} attempt(s): {result.error}",
                "failed",
            )
        else:
            log.info(
                "scale command %s: %s (%s -> %s workers)",
                result.command_id,
                result.outcome.value,
                result.workers_before,
                result.workers_after,
            )
        self._outcome(result)
        if self._on_result is not None:
            self._on_result(result)
        return Handled(offset, result)

    def _outcome(self, result: ApplyResult) -> None:
        """Publish what the command cost: the executor's preparation of new workers (an
        executor with ``last_prep_s``, e.g. the two-phase local pool) and how long the
        apply took. The pause in throughput is measured from trained counts where they
        are seen (:mod:`streamtrain.scale.handover`: the demo, the benchmark)."""
        topic = self.settings.outcomes_topic
        if self._producer is None or not topic or result.attempts == 0:
            return
        grew = (result.workers_after or 0) > (result.workers_before or 0)
        prep_s = getattr(self.applier.executor, "last_prep_s", None) if grew else None
        now_ms = int(s_to_ms(self._clock()))
        outcome = cp.ScaleOutcome(
            command_id=result.command_id,
            job=self.settings.job,
            outcome=result.outcome.value,
            assignment=self.settings.assignment,
            workers_before=result.workers_before or 0,
            workers_after=result.workers_after or 0,
            prep_s=float(prep_s or 0.0),
            started_at_ms=now_ms - int(s_to_ms(result.duration_s)),
            finished_at_ms=now_ms,
            error=result.error or "",
        )
        from confluent_kafka import KafkaException

        try:
            self._producer.produce(topic, key=self.settings.job.encode(), value=encode(outcome))
        except (BufferError, KafkaException) as exc:  # an outcome is best effort
            log.warning("could not publish the outcome of %s: %s", result.command_id, exc)

    def _alert(self, message: str, state: str, *, log_it: bool = True) -> None:
        if log_it:
            log.error("%s", message)
        if self._producer is None or not self.settings.alerts_topic:
            return
        alert = cp.Alert(
            alert_id=uuid.uuid4().hex,
            kind=cp.Alert.CONTROL_APP,
            severity=cp.Alert.CRITICAL,
            group=self.settings.job,
            state=f"scale_{state}",
            message=message,
            raised_at_ms=int(s_to_ms(self._clock())),
        )
        try:
            self._producer.produce(
                self.settings.alerts_topic, key=self.settings.job.encode(), value=encode(alert)
            )
            self.alerts_sent += 1
        except BufferError:
            log.exception("alert not queued: %s", message)
