"""The ModelArts greedy allocator: the two examples of its Fig. 4, the front of the
queue, and guarantee and serving jobs first."""

from streamtrain.cluster.greedy import greedy_allocate, training_time_s
from streamtrain.cluster.problem import ClusterJob, ClusterProblem, JobClass


def _job(name, workers, remaining_work, arrived_s=0.0, max_workers=16):
    return ClusterJob(
        name=name,
        job_class=JobClass.OPPORTUNISTIC,
        current_workers=workers,
        max_workers=max_workers,
        remaining_work=remaining_work,
        arrived_s=arrived_s,
    )


def test_fig4_top_idle_nodes_go_to_the_shortest_training_time():
    # Four jobs training, 2 idle nodes, no queue: job 4 has the shortest training time.
    jobs = (
        _job("job1", 4, 40_000.0),
        _job("job2", 2, 30_000.0),
        _job("job3", 4, 50_000.0),
        _job("job4", 2, 1_000.0),
    )
    allocation = greedy_allocate(ClusterProblem(jobs=jobs, capacity_workers=(14,)))
    assert allocation.granted() == {"job1": 4, "job2": 2, "job3": 4, "job4": 4}
    assert "shortest training time" in allocation.grants[3].reason


def test_fig4_bottom_the_longest_job_is_halved_for_the_queue():
    # No idle node, job 8 waiting: job 5 (longest training time) goes from 4 to 2.
    jobs = (
        _job("job5", 4, 90_000.0),
        _job("job6", 4, 10_000.0),
        _job("job7", 4, 20_000.0),
        _job("job8", 0, 5_000.0, arrived_s=1.0),
    )
    allocation = greedy_allocate(ClusterProblem(jobs=jobs, capacity_workers=(12,)))
    assert allocation.granted() == {"job5": 2, "job6": 4, "job7": 4, "job8": 2}
    assert "halved" in allocation.grants[0].reason


def test_the_front_of_the_queue_gets_as_many_as_possible():
    jobs = (_job("first", 0, 1e5, arrived_s=1.0, max_workers=16), _job("second", 0, 10.0, 2.0))
    allocation = greedy_allocate(ClusterProblem(jobs=jobs, capacity_workers=(20,)))
    assert allocation.granted() == {"first": 16, "second": 4}


def test_guarantee_and_serving_come_first_and_take_back_from_the_longest_job():
    jobs = (
        ClusterJob(
            name="online",
            job_class=JobClass.GUARANTEE,
            current_workers=2,
            max_workers=10,
            demand_workers=(6,),
        ),
        ClusterJob(
            name="serving",
            job_class=JobClass.SERVING,
            current_workers=2,
            min_workers=0,
            max_workers=10,
            demand_workers=(2,),
        ),
        _job("long", 4, 1e6),
        _job("short", 2, 10.0),
    )
    allocation = greedy_allocate(ClusterProblem(jobs=jobs, capacity_workers=(10,)))
    # the longest job is halved 4 -> 2 -> 1, then the next longest 2 -> 1: never below
    # one worker while halving can still free some (the paper's rule)
    assert allocation.granted() == {"online": 6, "serving": 2, "long": 1, "short": 1}


def test_jobs_are_stopped_only_when_every_one_is_down_to_one_worker():
    jobs = (
        ClusterJob(
            name="online",
            job_class=JobClass.GUARANTEE,
            current_workers=2,
            max_workers=10,
            demand_workers=(8,),
        ),
        _job("long", 4, 1e6),
        _job("mid", 2, 1e4),
        _job("short", 2, 10.0),
    )
    allocation = greedy_allocate(ClusterProblem(jobs=jobs, capacity_workers=(10,)))
    granted = allocation.granted()
    assert granted["online"] == 8
    # 8 offline workers into 2: every job to one worker, then one whole job stopped
    assert sorted((granted["long"], granted["mid"], granted["short"])) == [0, 1, 1]
    assert sum(g.granted_workers for g in allocation.grants) <= 10
    stopped = next(g for g in allocation.grants if g.granted_workers == 0)
    assert "stopped" in stopped.reason


def test_training_time_is_remaining_work_at_current_speed():
    job = _job("j", 1, 100.0)
    assert training_time_s(job, 1) == 100.0
    assert training_time_s(job, 0) == float("inf")
