"""PartitionEnds' bookkeeping of probes that get no record (the reader waits longer after
them and warns on a run of them)."""

from streamtrain.shards.ends import PartitionEnds

KEY = ("clicks", 0)


def test_misses_count_in_a_row_and_an_answer_resets_them():
    ends = PartitionEnds()
    assert [ends.missed(KEY) for _ in range(3)] == [1, 2, 3]
    assert ends.probed(KEY, high=10, now_s=0.0) == 3
    assert ends.missed(KEY) == 1
    assert ends.missed(("clicks", 1)) == 1  # counted per partition


def test_a_probe_waits_longer_after_each_miss_up_to_the_cap():
    ends = PartitionEnds()
    other = ("clicks", 1)
    assert ends.probe_wait_s([KEY, other], 0.5, 2.0) == 0.5
    ends.missed(KEY)
    assert ends.probe_wait_s([KEY, other], 0.5, 2.0) == 1.0  # the partition with most misses
    assert ends.probe_wait_s([other], 0.5, 2.0) == 0.5
    for _ in range(5):
        ends.missed(KEY)
    assert ends.probe_wait_s([KEY], 0.5, 2.0) == 2.0
    ends.probed(KEY, high=10, now_s=0.0)
    assert ends.probe_wait_s([KEY], 0.5, 2.0) == 0.5
