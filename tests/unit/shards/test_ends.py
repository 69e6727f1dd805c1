"""PartitionEnds' bookkeeping of probes that get no record (the reader warns on a run of
them)."""

from streamtrain.shards.ends import PartitionEnds

KEY = ("clicks", 0)


def test_misses_count_in_a_row_and_an_answer_resets_them():
    ends = PartitionEnds()
    assert [ends.missed(KEY) for _ in range(3)] == [1, 2, 3]
    assert ends.probed(KEY, high=10, now_s=0.0) == 3
    assert ends.missed(KEY) == 1
    assert ends.missed(("clicks", 1)) == 1  # counted per partition
