"""A partition's last records are cut, whatever left its queue: the book's liveness.

A partition whose queue was full (``queued_shards_per_partition`` shards waiting, none
of them growable) when its last records arrived is passed over by the tick until its
queue has room. Room made by a lease refilled it; room made by a holder reclaiming its
requeued shards, or by the last holder reporting a requeued shard done, did not: the
records after the cut waited for more records to arrive, which at the end of a day
never do (fewer than ``min_shard_records`` are not cut on demand either). In a
``streamtrain demo`` run the last two records of a partition stayed uncut, untrained
and uncommitted until the drain timed out.
"""

from streamtrain.shards import ShardBook, ShardRange, ShardSettings

T = "clicks"
KEY = (T, 0)


def full_queue_then_the_last_records():
    """Two full shards leased to ``w`` and requeued (``w`` is said to have left while it
    still holds them), then 2 more records: the queue is full of shards that cannot
    grow, so the tick cuts nothing; returns the book and ``w``'s grants."""
    b = ShardBook(
        ShardSettings(
            shard_records=4, min_shard_records=3, queued_shards_per_partition=2, max_wait_s=1.0
        )
    )
    b.observe(T, 0, 8, 0, now_s=0.0)
    grants = b.request("w", 2, now_s=0.0)
    assert [g.shard for g in grants] == [ShardRange(T, 0, 0, 4), ShardRange(T, 0, 4, 8)]
    assert len(b.forget_worker("w")) == 2  # a leaving update on its behalf: requeued
    b.observe_all({KEY: 10}, {}, now_s=1.0)
    assert b.positions()[KEY] == (0, 8, 10)
    return b, grants


def tick_until(b, now_s):
    t = 1.0
    while t < now_s:
        t += 0.25
        b.observe_all({KEY: 10}, {}, now_s=t)


def test_the_last_records_are_cut_once_the_holder_reclaimed_its_requeued_shards():
    b, grants = full_queue_then_the_last_records()
    assert b.heartbeat("w", [(g.shard, g.epoch) for g in grants], now_s=1.1) == []
    assert b.stats().queued_shards == 0  # both reclaimed: the queue has room
    tick_until(b, 3.0)
    assert b.positions()[KEY] == (0, 10, 10)
    [tail] = b.request("v", 1, now_s=3.0)
    assert tail.shard == ShardRange(T, 0, 8, 10)


def test_the_last_records_are_cut_once_the_last_holder_reported_its_requeued_shards_done():
    b, grants = full_queue_then_the_last_records()
    for g in grants:  # slow, not dead: it trained them all
        assert b.done("w", g.shard, g.epoch, now_s=1.2) is None
    tick_until(b, 3.0)
    assert b.positions()[KEY] == (8, 10, 10)
    [tail] = b.request("v", 1, now_s=3.0)
    assert tail.shard == ShardRange(T, 0, 8, 10)
    assert b.done("v", tail.shard, tail.epoch, now_s=3.5) is None
    assert b.committable() == {KEY: 10}


def test_a_worker_finding_the_queue_empty_gets_records_that_waited_even_if_few():
    b = ShardBook(ShardSettings(shard_records=100, min_shard_records=20, max_wait_s=1.0))
    b.observe(T, 0, 2, 0, now_s=0.0)  # 2 records: fewer than a shard cut on demand
    assert b.request("v", 1, now_s=0.5) == []  # not yet waited max_wait_s
    [grant] = b.request("v", 1, now_s=1.5)  # they did (the timer has not cut them yet)
    assert grant.shard == ShardRange(T, 0, 0, 2)
