"""What a worker says about its Kafka connection: one clear line when it goes, one when back.

Owned here: :class:`KafkaHealth`, fed with librdkafka's error callbacks and consume
error events. librdkafka itself reconnects with exponential backoff; this class turns
its stream of transport errors into a single WARNING when Kafka becomes unreachable, a
reminder every 30 s while it stays so, and a WARNING with the outage's length when
records or commits flow again. Other client errors are logged at most once per kind
every 30 s. Fatal errors are returned as a :class:`~streamtrain.errors.KafkaError`
for the consumer to stop on.
"""

from __future__ import annotations

import logging
import time

from confluent_kafka import KafkaError as ClientError

from streamtrain.errors import KafkaError

__all__ = ["KafkaHealth"]

log = logging.getLogger("streamtrain.ingest.consumer")

_UNREACHABLE = frozenset(
    {ClientError._ALL_BROKERS_DOWN, ClientError._TRANSPORT, ClientError._RESOLVE}
)
_REPEAT_LOG_S = 30.0


class KafkaHealth:
    """Outage tracking and rate-limited logging for one consumer's client errors."""

    def __init__(self, bootstrap: str, group: str, backoff_max_ms: int) -> None:
        self.bootstrap = bootstrap
        self.group = group
        self.backoff_max_ms = backoff_max_ms
        self.outage_since: float | None = None
        self._outage_logged_at = 0.0
        self._error_logged_at: dict[int, float] = {}

    def on_error(self, error: ClientError) -> KafkaError | None:
        """Log ``error``; return the error to stop on if it is fatal."""
        if error.fatal():
            return KafkaError(f"fatal Kafka client error for group {self.group!r}: {error.str()}")
        now = time.monotonic()
        if error.code() in _UNREACHABLE:
            if self.outage_since is None:
                self.outage_since = self._outage_logged_at = now
                log.warning(
                    "Kafka unreachable at %s (%s); retrying with backoff up to %d ms, "
                    "acknowledged records are committed once it is back",
                    self.bootstrap,
                    error.str(),
                    self.backoff_max_ms,
                )
            elif now - self._outage_logged_at >= _REPEAT_LOG_S:
                self._outage_logged_at = now
                log.warning(
                    "Kafka still unreachable at %s after %.0f s; still retrying",
                    self.bootstrap,
                    now - self.outage_since,
                )
            return None
        last = self._error_logged_at.get(error.code())
        if last is None or now - last >= _REPEAT_LOG_S:
            self._error_logged_at[error.code()] = now
            log.warning("Kafka client error for group %r: %s", self.group, error.str())
        return None

    def back_online(self) -> None:
        """Records or a commit got through: end the outage, if there was one."""
        if self.outage_since is not None:
            log.warning(
                "Kafka reachable again at %s after %.1f s; resuming",
                self.bootstrap,
                time.monotonic() - self.outage_since,
            )
            self.outage_since = None
