"""Who the peers of a worker are: the membership interface and its in-process variant.

Owned here: :class:`PeerInfo` (a worker's ZeroMQ endpoints, CURVE public key and
incarnation), the :class:`Membership` protocol the ForwardingUnit polls, and
:class:`StaticMembership` over a :class:`MemberDirectory`, for unit tests, benchmarks and
fixed deployments. The Kafka-backed membership (``<job>.members``) is
:mod:`streamtrain.shuffle.kafka_membership`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from streamtrain.errors import ConfigError
from streamtrain.shuffle.announcements import (
    curve_key_problem,
    endpoint_problem,
    worker_id_problem,
)
from streamtrain.shuffle.codec import BATCH_SCHEMA_VERSION

__all__ = ["MemberDirectory", "Membership", "PeerInfo", "StaticMembership", "new_incarnation"]


def new_incarnation() -> int:
    """A number that differs on every start of a worker (wall-clock nanoseconds)."""
    return time.time_ns()


@dataclass(frozen=True, slots=True)
class PeerInfo:
    """How to reach one worker of the job.

    ``curve_public_key`` is the Z85 key its sockets serve with (``None`` without CURVE);
    ``incarnation`` changes on every restart, so peers reset what they knew about it.
    ``batch_schema_version`` is the newest ``RecordBatch`` form it reads: 1 for a worker
    of an older release (it announced none), which peers then speak its dialect to
    (:mod:`~streamtrain.shuffle.legacy`) during a rolling upgrade.
    Every field is checked here (:mod:`~streamtrain.shuffle.announcements`), so a peer
    that announced something unusable never reaches the sockets: :class:`ConfigError`.
    """

    worker_id: str
    data_endpoint: str
    event_endpoint: str
    incarnation: int
    curve_public_key: bytes | None = None
    batch_schema_version: int = BATCH_SCHEMA_VERSION

    @property
    def legacy(self) -> bool:
        """Whether it is a worker of a release before columnar batches."""
        return self.batch_schema_version < BATCH_SCHEMA_VERSION

    def __post_init__(self) -> None:
        problem = worker_id_problem(self.worker_id)
        if problem is not None:
            raise ConfigError(f"peer: {problem}")
        for endpoint in (self.data_endpoint, self.event_endpoint):
            problem = endpoint_problem(endpoint)
            if problem is not None:
                raise ConfigError(f"peer {self.worker_id!r}: {problem}")
        if self.curve_public_key is not None:
            problem = curve_key_problem(self.curve_public_key)
            if problem is not None:
                raise ConfigError(f"peer {self.worker_id!r}: {problem}")
        if self.batch_schema_version < 1:
            raise ConfigError(
                f"peer {self.worker_id!r}: batch schema version {self.batch_schema_version}"
            )
        if self.incarnation < 0:
            raise ConfigError(f"peer {self.worker_id!r}: negative incarnation {self.incarnation}")


class Membership(Protocol):
    """Announces this worker and lists the live others; thread-safe."""

    def start(self, me: PeerInfo) -> None: ...

    def peers(self) -> Mapping[str, PeerInfo]:
        """Live peers by worker id, this worker excluded."""
        ...

    def close(self) -> None: ...


class MemberDirectory:
    """A thread-safe, in-process registry of workers (no heartbeats, no expiry)."""

    def __init__(self, members: Iterable[PeerInfo] = ()) -> None:
        self._lock = threading.Lock()
        self._members = {member.worker_id: member for member in members}

    def announce(self, member: PeerInfo) -> None:
        with self._lock:
            self._members[member.worker_id] = member

    def withdraw(self, worker_id: str) -> None:
        with self._lock:
            self._members.pop(worker_id, None)

    def snapshot(self) -> dict[str, PeerInfo]:
        with self._lock:
            return dict(self._members)


class StaticMembership:
    """Membership over a :class:`MemberDirectory` shared by the workers that use it.

    Several workers in one process share one directory; separate processes each get a
    directory pre-filled with the others' fixed endpoints.
    """

    def __init__(self, directory: MemberDirectory) -> None:
        self._directory = directory
        self._me: str | None = None

    def start(self, me: PeerInfo) -> None:
        self._me = me.worker_id
        self._directory.announce(me)

    def peers(self) -> Mapping[str, PeerInfo]:
        members = self._directory.snapshot()
        members.pop(self._me or "", None)
        return members

    def close(self) -> None:
        if self._me is not None:
            self._directory.withdraw(self._me)
