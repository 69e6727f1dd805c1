"""The shuffle settings of one worker, derived from its queue and batch sizes.

Owned here: :func:`worker_shuffle_settings`, what ``streamtrain worker --shuffle ...``
runs with: the shuffle's local queue is the worker's queue (``queue_records``), and so
is its overflow; the watermarks default to 20 % and 80 % of it; forwarded batches are
training batches, and a receiver's credit window holds at least one of them. CURVE is
on by default whenever the sockets bind beyond loopback (a fresh key pair per run), and
off on loopback. Pure: no I/O, everything validated by
:class:`~streamtrain.shuffle.settings.ShuffleSettings` (a
:class:`~streamtrain.errors.ConfigError`, before any broker is contacted).
"""

from __future__ import annotations

from streamtrain.shuffle.announcements import is_loopback
from streamtrain.shuffle.policy import ShufflePolicy
from streamtrain.shuffle.settings import CurveKeys, ShuffleSettings

__all__ = ["worker_shuffle_settings"]


def worker_shuffle_settings(
    job: str,
    worker_id: str,
    *,
    policy: ShufflePolicy | str,
    batch_records: int,
    queue_records: int,
    host: str = "127.0.0.1",
    advertise_host: str | None = None,
    low_watermark_records: int | None = None,
    high_watermark_records: int | None = None,
    ack_timeout_ms: int = 10_000,
    heartbeat_interval_ms: int = 1_000,
    heartbeat_timeout_ms: int = 5_000,
    curve: bool | None = None,
    topics: tuple[str, ...] = (),
) -> ShuffleSettings | None:
    """The worker's :class:`ShuffleSettings`, or ``None`` for the ``none`` policy.

    ``curve`` generates a fresh CURVE key pair for this run (``None``: whenever ``host``
    is not a loopback address; ``False`` beyond loopback is refused by the settings).
    """
    policy = ShufflePolicy(policy)
    low = low_watermark_records or max(1, queue_records // 5)
    high = high_watermark_records or max(low, queue_records * 4 // 5)
    if policy is ShufflePolicy.NONE:
        return None
    return ShuffleSettings(
        job=job,
        worker_id=worker_id,
        policy=policy,
        queue_capacity_records=queue_records,
        low_watermark_records=low,
        high_watermark_records=high,
        overflow_capacity_records=queue_records,
        batch_records=batch_records,
        credit_window_records=max(batch_records, high),
        ack_timeout_ms=ack_timeout_ms,
        heartbeat_interval_ms=heartbeat_interval_ms,
        heartbeat_timeout_ms=heartbeat_timeout_ms,
        host=host,
        advertise_host=advertise_host,
        curve=CurveKeys.generate() if (not is_loopback(host) if curve is None else curve) else None,
        topics=topics,
    )
