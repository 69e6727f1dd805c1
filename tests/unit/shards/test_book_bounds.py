"""ShardBook stays small and trusts only itself: lazy cutting, bounded table values,
epochs only from the book, validated restores."""

import json

import pytest

from streamtrain.shards import ShardBook, ShardRange, ShardRefusal, ShardSettings
from streamtrain.shards.model import MAX_EPOCH

T = "clicks"


def book(**kw):
    return ShardBook(ShardSettings(**kw))


def value_bytes(b):
    return max(len(json.dumps(v, separators=(",", ":"))) for v in b.snapshot().values())


@pytest.mark.parametrize("backlog", [10**6, 10**9, 10**15])
def test_a_backlog_is_cut_a_few_shards_at_a_time_whatever_its_size(backlog):
    b = book(shard_records=1_000, queued_shards_per_partition=4)
    assert b.observe(T, 0, backlog, 0, now_s=0.0) == 4
    stats = b.stats()
    assert (stats.queued_shards, stats.uncut_records) == (4, backlog - 4_000)
    assert value_bytes(b) < 300
    grants = [g for w in range(10) for g in b.request(f"w{w}", 3, now_s=0.1)]
    assert len(grants) == 30  # cut on as the queue drains
    assert [g.shard.start_offset for g in grants] == sorted(g.shard.start_offset for g in grants)
    assert b.stats().queued_shards <= 4


def test_done_shards_behind_a_stuck_one_are_one_range_in_the_table():
    b = book(shard_records=10)
    b.observe(T, 0, 10**9, 0, now_s=0.0)
    [stuck] = b.request("slow", 1, now_s=0.0)
    for _i in range(2_000):
        [g] = b.request("fast", 1, now_s=0.0)
        assert b.done("fast", g.shard, g.epoch, now_s=0.0) is None
        b.heartbeat("slow", [(stuck.shard, stuck.epoch)], now_s=0.0)
    assert b.committable() == {}  # the stuck shard holds the prefix back
    value = json.loads(json.dumps(b.snapshot()))["clicks|0"]
    assert value["done"] == [[10, 20_010]]
    assert value_bytes(b) < 300
    assert b.done("slow", stuck.shard, stuck.epoch, now_s=1.0) is None
    assert b.committable() == {(T, 0): 20_010}


def test_a_partition_leases_at_most_max_leased_per_partition():
    b = book(shard_records=10, max_leased_per_partition=3, max_held_shards=1)
    b.observe(T, 0, 1_000, 0, now_s=0.0)
    b.observe(T, 1, 1_000, 0, now_s=0.0)
    grants = [g for w in range(8) for g in b.request(f"w{w}", 1, now_s=0.0)]
    by_partition = [g.shard.partition for g in grants]
    assert by_partition.count(0) == 3 and by_partition.count(1) == 3
    assert len(grants) == 6
    first = next(g for g in grants if g.shard.partition == 0)
    b.done(first.worker_id, first.shard, first.epoch, now_s=0.1)
    [more] = b.request("w9", 1, now_s=0.1)
    assert more.shard.partition == 0


def test_an_epoch_the_book_never_issued_is_refused_and_changes_nothing():
    b = book(shard_records=1_000)
    b.observe(T, 0, 5_000, 0, now_s=100.0)
    queued = ShardRange(T, 0, 0, 1_000)
    for epoch in (2**64 - 1, MAX_EPOCH, 1):
        assert b.heartbeat("evil", [(queued, epoch)], now_s=100.1) == [
            (queued, ShardRefusal.EPOCH_NOT_ISSUED)
        ]
    assert b.epoch == 0 and b.leases() == []
    assert b.done("evil", queued, 2**64 - 1, now_s=100.1) == ShardRefusal.EPOCH_NOT_ISSUED
    assert b.committable() == {}
    grants = b.request("w1", 2, now_s=100.2)  # grants go on
    assert [g.epoch for g in grants] == [1, 2]


def test_done_is_taken_from_the_holder_or_its_last_holder_only():
    b = book(shard_records=10, lease_s=1.0)
    b.observe(T, 0, 30, 0, now_s=0.0)
    [g] = b.request("a", 1, now_s=0.0)
    assert b.done("b", g.shard, g.epoch, now_s=0.1) == ShardRefusal.NOT_HOLDER
    b.heartbeat("c", [], now_s=2.0)
    [expired] = b.expire(now_s=2.0)  # a went silent: its shard is queued again
    assert expired.shard == g.shard
    assert b.done("b", g.shard, g.epoch, now_s=2.1) == ShardRefusal.NOT_HOLDER
    assert b.done("a", g.shard, g.epoch, now_s=2.1) is None  # slow, but it trained them
    assert b.committable() == {(T, 0): 10}


def test_a_slow_holder_reclaims_its_own_shard_but_no_one_else_can():
    b = book(shard_records=10, lease_s=1.0)
    b.observe(T, 0, 30, 0, now_s=0.0)
    [g] = b.request("a", 1, now_s=0.0)
    [other] = b.request("x", 1, now_s=0.0)
    b.heartbeat("x", [(other.shard, other.epoch)], now_s=2.0)
    b.expire(now_s=2.0)
    assert b.heartbeat("b", [(g.shard, other.epoch)], now_s=2.1) == [
        (g.shard, ShardRefusal.NOT_HOLDER)
    ]
    assert b.heartbeat("a", [(g.shard, g.epoch + 1)], now_s=2.1) == [
        (g.shard, ShardRefusal.NOT_HOLDER)
    ]
    assert b.heartbeat("a", [(g.shard, g.epoch)], now_s=2.1) == []
    assert [(x.shard, x.worker_id, x.epoch) for x in b.held_by("a")] == [(g.shard, "a", g.epoch)]


def restored_from(table, **kw):
    b = book(**kw)
    return b, b.restore(json.loads(json.dumps(table)), now_s=10.0)


def a_table():
    b = book(shard_records=10)
    b.observe(T, 0, 100, 0, now_s=0.0)
    b.observe(T, 1, 100, 0, now_s=0.0)
    grants = b.request("a", 3, now_s=0.0)
    b.done("a", grants[1].shard, grants[1].epoch, now_s=0.1)
    return list(b.snapshot().values())


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("epoch", 2**64 - 1),
        ("epoch", -1),
        ("base", -5),
        ("cut_to", -1),  # below the base
        ("committed", 10**6),  # above the base
        ("partition", -1),
        ("topic", ""),
        ("workers", ["a", ""]),
        ("workers", ["x" * 1_000]),
        ("leased", [[0, 10, 0, 10**9]]),  # an epoch above the value's own
        ("leased", [[0, 10, 5, 1]]),  # no such worker
        ("leased", [[0, 10, 0, 1], [5, 15, 0, 2]]),  # overlapping
        ("leased", [[0, 10**6, 0, 1]]),  # past the cut
        ("done", [[0, 10], [5, 20]]),  # overlapping
        ("done", "nonsense"),
        ("leased", [[0, 10, 0, True]]),
    ],
)
def test_a_table_value_a_coordinator_could_not_have_written_is_skipped(field, bad):
    table = a_table()
    table[0][field] = bad
    b, restored = restored_from(table, shard_records=10)
    assert restored == 1  # the other partition only
    assert [key for key in b.positions()] == [(T, 1)]
    assert b.epoch < 2**40  # not the 2**64 - 1 of the bad value


def test_a_restored_book_takes_back_a_lost_grant_and_never_issues_its_epoch_again():
    b = book(shard_records=10, lease_s=1.0)
    b.observe(T, 0, 100, 0, now_s=0.0)
    [kept] = b.request("a", 1, now_s=0.0)
    table = json.loads(json.dumps(b.snapshot()))
    [lost] = b.request("b", 1, now_s=0.1)  # sent, but its table write was lost
    restored = book(shard_records=10, lease_s=1.0)
    restored.restore(table.values(), now_s=10.0)
    assert restored.heartbeat("b", [(lost.shard, lost.epoch)], now_s=10.1) == []
    assert restored.heartbeat("a", [(kept.shard, kept.epoch)], now_s=10.1) == []
    [fresh] = restored.request("c", 1, now_s=11.5)
    assert fresh.epoch > lost.epoch > table["clicks|0"]["epoch"]
    again = book(shard_records=10, lease_s=1.0)  # every write lost: an empty table
    again.restore([], now_s=10.0)
    again.observe(T, 0, 100, 0, now_s=10.0)
    assert all(g.epoch > lost.epoch for g in again.request("d", 3, now_s=10.0))
