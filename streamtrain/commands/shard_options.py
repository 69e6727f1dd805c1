"""The shard coordinator's options of ``streamtrain lag run`` (``--assignment shards``):
``--shards-job`` and the shard sizes, waits and lease, each with its
``STREAMTRAIN_SHARD*`` variable, and :func:`shard_job_settings`, their values as the
control app's :class:`~streamtrain.control.shard_coordinator.ShardJobSettings` (or
``None``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from streamtrain.commands.common import OptionGroup, option

if TYPE_CHECKING:
    from streamtrain.control.shard_coordinator import ShardJobSettings

__all__ = ["shard_job_settings", "shard_options"]


def _declared() -> OptionGroup:
    """The shard coordinator's options (module docstring), declared here only."""
    options = [
        option(
            "--shards-job",
            env="SHARDS_JOB",
            default=None,
            help="Coordinate `streamtrain worker --assignment shards` for this job: cut its "
            "--topic partitions into offset-range shards, lease them to the job's workers on "
            "<job>.shards / <job>.shard-grants, and commit each partition's done prefix under "
            "the job's group id. State survives a restart (the changelogged `shards` table).",
        ),
        option(
            "--shard-records",
            env="SHARD_RECORDS",
            type=click.IntRange(min=1),
            default=1_000,
            show_default=True,
            help="Records in a full shard (a slow worker gets smaller ones).",
        ),
        option(
            "--shard-max-wait-s",
            env="SHARD_MAX_WAIT_S",
            type=click.FloatRange(min=0, min_open=True),
            default=1.0,
            show_default=True,
            help="Cut a smaller shard once the oldest uncut record waited this long.",
        ),
        option(
            "--shard-lease-s",
            env="SHARD_LEASE_S",
            type=click.FloatRange(min=0, min_open=True),
            default=3.0,
            show_default=True,
            help="A shard whose worker sent no heartbeat for this long goes back to the queue.",
        ),
        option(
            "--shard-tick-s",
            env="SHARD_TICK_S",
            type=click.FloatRange(min=0, min_open=True),
            default=0.25,
            show_default=True,
            help="How often new offsets are cut into shards and leases checked.",
        ),
        option(
            "--shard-discover-interval-s",
            env="SHARD_DISCOVER_INTERVAL_S",
            type=click.FloatRange(min=0, min_open=True),
            default=30.0,
            show_default=True,
            help="How often the job's topics are listed again, so partitions added to them "
            "later are trained too (a listing that fails is retried at every tick).",
        ),
    ]
    return OptionGroup(*options)


shard_options = _declared()


def shard_job_settings(opts: dict[str, Any], topics: tuple[str, ...]) -> ShardJobSettings | None:
    """Take the shard options out of ``opts``; the coordinator's settings, if asked for."""
    values = shard_options.take(opts)
    if values["shards_job"] is None:
        return None
    from streamtrain.control.shard_coordinator import ShardJobSettings
    from streamtrain.shards.model import ShardSettings

    return ShardJobSettings(
        job=values["shards_job"],
        topics=topics,
        book=ShardSettings(
            shard_records=values["shard_records"],
            max_wait_s=values["shard_max_wait_s"],
            lease_s=values["shard_lease_s"],
        ),
        tick_s=values["shard_tick_s"],
        discover_interval_s=values["shard_discover_interval_s"],
    )
