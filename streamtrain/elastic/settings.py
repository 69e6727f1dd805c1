"""How one model is trained by many workers: the engine and its settings.

Owned here: :class:`EngineKind` (``none``, ``torchft``, ``torchelastic``),
:class:`ElasticSettings` (one worker's engine settings, validated when built: a
:class:`~streamtrain.errors.ConfigError` before anything starts) and
:func:`lighthouse_url`, which turns ``HOST:PORT`` into the URL torchft wants. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from streamtrain.errors import ConfigError
from streamtrain.ports import is_loopback

__all__ = ["DEFAULT_LIGHTHOUSE_PORT", "ElasticSettings", "EngineKind", "lighthouse_url"]

#: torchft's own default lighthouse port.
DEFAULT_LIGHTHOUSE_PORT = 29510


class EngineKind(StrEnum):
    """Which engine keeps the workers' model copies one model.

    * ``none``: every worker trains its own copy, nothing is exchanged (each step is
      committed when it returns); for comparison, and for jobs that want it;
    * ``torchft``: torchft's Manager on gloo; a lighthouse forms a quorum every step,
      workers join and leave between steps while the others keep stepping, a joiner
      heals from a live peer;
    * ``torchelastic``: ``torch.distributed`` under ``torchrun`` (c10d rendezvous);
      a change of workers restarts them all from the newest durable checkpoint.
    """

    NONE = "none"
    TORCHFT = "torchft"
    TORCHELASTIC = "torchelastic"


def lighthouse_url(address: str) -> str:
    """``HOST:PORT`` (or ``http://HOST:PORT``) as ``http://HOST:PORT``; else ConfigError."""
    rest = address.strip()
    if rest.startswith("http://"):
        rest = rest[len("http://") :]
    host, sep, port = rest.rstrip("/").rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"lighthouse address {address!r} is not HOST:PORT")
    return f"http://{host}:{int(port)}"


@dataclass(frozen=True, slots=True)
class ElasticSettings:
    """One worker's engine settings.

    ``step_wait_s`` bounds how long a step waits for a batch before it steps empty (every
    participant steps every round, whatever its data). ``host`` is where this worker's
    engine listens (torchft's manager, its store and the heal server; gloo picks its
    interface from ``GLOO_SOCKET_IFNAME``); beyond loopback only with
    ``trusted_network``: nothing there is authenticated. ``timeout_s`` bounds a
    collective, a commit vote and a heal; ``quorum_timeout_s`` one quorum request (it is
    retried while the lighthouse is away). ``checkpoint_dir`` and
    ``checkpoint_every_steps``: where and how often ``torchelastic`` saves the durable
    checkpoint a restart resumes from. ``max_bad_batches``: consecutive batches whose
    step fails (or gives a non-finite loss) before the worker stops: beyond it the step
    is broken, not the data.
    """

    engine: EngineKind = EngineKind.NONE
    replica_id: str = "worker"
    lighthouse: str | None = None
    step_wait_s: float = 0.2
    host: str = "127.0.0.1"
    trusted_network: bool = False
    timeout_s: float = 5.0
    quorum_timeout_s: float = 2.0
    connect_timeout_s: float = 10.0
    heartbeat_interval_ms: int = 100
    checkpoint_dir: Path | None = None
    checkpoint_every_steps: int = 20
    max_bad_batches: int = 5
    max_state_bytes: int = 1 << 30

    def __post_init__(self) -> None:
        engine = EngineKind(self.engine)
        object.__setattr__(self, "engine", engine)
        if self.step_wait_s <= 0:
            raise ConfigError(f"the step wait must be positive, got {self.step_wait_s} s")
        for name in ("timeout_s", "quorum_timeout_s", "connect_timeout_s"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        if self.heartbeat_interval_ms < 1 or self.checkpoint_every_steps < 1:
            raise ConfigError("the heartbeat interval and checkpoint interval must be positive")
        if self.max_bad_batches < 1 or self.max_state_bytes < 1:
            raise ConfigError("max_bad_batches and max_state_bytes must be positive")
        if not self.replica_id:
            raise ConfigError("an engine needs a replica id (the worker id)")
        if not is_loopback(self.host) and not self.trusted_network:
            raise ConfigError(
                f"the engine would listen on {self.host}, beyond loopback, where its "
                "servers (torchft's manager and heal server, the store) authenticate "
                "nothing; pass --trusted-network to allow it on a network you trust"
            )
        if engine is EngineKind.TORCHFT:
            if self.lighthouse is None:
                raise ConfigError("--engine torchft needs --lighthouse HOST:PORT")
            object.__setattr__(self, "lighthouse", lighthouse_url(self.lighthouse))
        if engine is EngineKind.TORCHELASTIC and self.checkpoint_dir is None:
            raise ConfigError(
                "--engine torchelastic needs --checkpoint-dir: a restart resumes from the "
                "newest durable checkpoint there"
            )
