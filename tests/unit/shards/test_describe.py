"""What the coordinator shows of a stuck partition: ShardBook.lagging, describe_line."""

from streamtrain.shards import ShardBook, ShardSettings
from streamtrain.shards.view import describe_line

T = "clicks"


def test_lagging_lists_partitions_with_records_not_done_with_their_queued_and_leased_shards():
    b = ShardBook(ShardSettings(shard_records=10, min_shard_records=10, max_wait_s=60.0))
    b.observe(T, 0, 25, 0, now_s=0.0)  # 0..10, 10..20 cut; 20..25 waits
    b.observe(T, 1, 0, 0, now_s=0.0)  # nothing on partition 1: nothing to do
    [grant] = b.request("w", 1, now_s=1.0)
    assert grant.shard.start_offset == 0
    views = b.lagging(now_s=2.0)
    assert [v["partition"] for v in views] == [0]  # partition 1 has no record
    [view] = views
    assert (view["base"], view["cut_to"], view["hwm"]) == (0, 20, 25)
    assert view["leased"] == [[0, 10, "w", grant.epoch, 2.0]]
    assert view["queued_count"] == 1 and view["queued"] == [[10, 20, ""]]
    line = describe_line(view)
    assert line.startswith(f"{T}[0]: base 0 cut 20 hwm 25 committed 0;")
    assert f"leased 1 [0..10@w#{grant.epoch}(2.0s)]" in line and "queued 1 [10..20]" in line


def test_a_requeued_shard_shows_its_last_holder_and_the_lists_are_bounded():
    b = ShardBook(
        ShardSettings(shard_records=1, min_shard_records=1, queued_shards_per_partition=40)
    )
    b.observe(T, 0, 40, 0, now_s=0.0)
    [grant] = b.request("w", 1, now_s=0.0)
    b.release("w", [grant.shard])
    [view] = b.lagging(now_s=0.0)
    assert view["queued_count"] == 40 and len(view["queued"]) == 16
    assert view["queued"][0] == [0, 1, "w"]
    assert "0..1(was w)" in describe_line(view)


def test_describe_line_reads_a_view_with_fields_missing():
    assert describe_line({"partition": 3}).startswith("?[3]: base ? cut ?")
