"""What the demo's child processes have in common: their names, command and connection.

Owned here (pure; nothing is started):

* :class:`DemoNames`: what one run calls its Kafka objects: the job (also the consumer
  group), the data topic and the control-plane topics (``throughput``, ``commands``,
  ``reports``, ``alerts``) and the control app's id, all derived from the run id.
* :func:`streamtrain_command`: the argv of a ``streamtrain`` subprocess run by this
  interpreter (``python -m streamtrain ...``).
* :func:`kafka_env`: the ``STREAMTRAIN_*`` environment variables that give a subprocess
  the same Kafka connection (children learn it from the environment, never from the
  command line, so no secret shows up in ``ps``).

The two children's own arguments are built by :mod:`streamtrain.demo.control_args`
(the control app) and :mod:`streamtrain.demo.worker_args` (the worker pool).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from streamtrain.config import KafkaSettings
from streamtrain.errors import ConfigError

__all__ = ["CONTROL_TOPIC_KINDS", "DemoNames", "kafka_env", "streamtrain_command"]

# The control plane's topics, one partition each (see DemoNames.control).
CONTROL_TOPIC_KINDS = ("throughput", "commands", "reports", "alerts", "outcomes")


@dataclass(frozen=True, slots=True)
class DemoNames:
    """The names of one run's job and topics (see the module docstring)."""

    run_id: str
    topic: str  # the data topic

    @classmethod
    def for_run(cls, run_id: str, topic: str | None = None) -> DemoNames:
        """A run's names; the data topic is a new one per run unless ``topic`` is given."""
        return cls(run_id, topic or f"streamtrain.demo.{run_id}.ctr")

    @property
    def job(self) -> str:
        return f"streamtrain-demo-{self.run_id}"

    def control(self, kind: str) -> str:
        """A control-plane name of this run: a topic of :data:`CONTROL_TOPIC_KINDS`, or
        ``control`` (the control app's id)."""
        return f"streamtrain.demo.{self.run_id}.{kind}"


def streamtrain_command(*args: str) -> list[str]:
    """``python -m streamtrain *args`` with this interpreter."""
    return [sys.executable, "-m", "streamtrain", *args]


def kafka_env(settings: KafkaSettings) -> dict[str, str]:
    """The ``STREAMTRAIN_*`` variables that give a subprocess the same connection."""
    env = {"STREAMTRAIN_BOOTSTRAP": settings.bootstrap}
    connection = settings.connection().items()
    env.update({f"STREAMTRAIN_{name.upper()}": v for name, v in connection if v})
    if settings.extra:
        if any(" " in f"{k}={v}" for k, v in settings.extra.items()):
            raise ConfigError("--kafka-config values with spaces cannot be passed to the workers")
        env["STREAMTRAIN_KAFKA_CONFIG"] = " ".join(f"{k}={v}" for k, v in settings.extra.items())
    return env
