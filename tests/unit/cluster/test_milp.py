"""The rolling-horizon MILP: a tiny instance against brute force, powers of two, an
infeasible pool, the guarantee jobs first, HiGHS within its budget."""

import itertools
import math

import pytest

from streamtrain.cluster.milp import _EPSILON, MilpSettings, milp_allocate
from streamtrain.cluster.problem import ClusterJob, ClusterProblem, JobClass, SpeedCurve
from streamtrain.errors import ConfigError

# Every step in whole numbers, so that brute force over whole counts is the same problem.
EXACT = MilpSettings(mip_rel_gap=0.0, time_limit_s=10.0, integral_steps=2)
STEP_S = 100.0


def _tiny():
    """A guarantee job wanting 2 then 3 workers, two offline jobs (one running on 2,
    pausing 50 s per change), a pool of 5 workers for two steps."""
    curve = SpeedCurve.prior(1.0, 3)  # 0, 1, 1.6, 2.1 records/s
    return ClusterProblem(
        jobs=(
            ClusterJob(
                name="online",
                job_class=JobClass.GUARANTEE,
                current_workers=2,
                min_workers=1,
                max_workers=3,
                demand_workers=(2, 3),
            ),
            ClusterJob(
                name="small",
                job_class=JobClass.OPPORTUNISTIC,
                max_workers=3,
                speed=curve,
                remaining_work=180.0,
            ),
            ClusterJob(
                name="big",
                job_class=JobClass.OPPORTUNISTIC,
                current_workers=2,
                max_workers=3,
                speed=curve,
                remaining_work=900.0,
                pause_s=50.0,
            ),
        ),
        capacity_workers=(5, 5),
        step_s=STEP_S,
    )


def _objective(problem, plans, settings):
    """The documented objective (to minimize) of a full plan, evaluated directly."""
    total = 0.0
    horizon_steps = problem.horizon_steps
    for job in problem.jobs:
        plan = plans[job.name]
        total += _EPSILON * sum(plan)
        if job.job_class is JobClass.GUARANTEE:
            demand = job.demand(horizon_steps)
            total += settings.guarantee_penalty * sum(
                max(0, d - n) for d, n in zip(demand, plan, strict=True)
            )
            continue
        curve = job.curve()
        total += settings.wait_penalty * sum(1 for n in plan if n == 0)
        done = 0.0
        for n in plan:
            done = min(job.remaining_work, done + STEP_S * curve.at(n))
            total -= done / job.remaining_work
        if plan[0] != job.current_workers:
            lost = job.pause_s * curve.at(job.current_workers)
            total += settings.change_cost + lost * horizon_steps / job.remaining_work
        total += settings.change_cost * sum(abs(b - a) for a, b in itertools.pairwise(plan))
    return total


def _brute_force(problem, settings):
    options = {
        j.name: list(itertools.product(j.counts, repeat=problem.horizon_steps))
        for j in problem.jobs
    }
    best, best_plans = math.inf, None
    for combo in itertools.product(*options.values()):
        plans = dict(zip(options, combo, strict=True))
        if any(
            sum(p[t] for p in plans.values()) > cap
            for t, cap in enumerate(problem.capacity_workers)
        ):
            continue
        value = _objective(problem, plans, settings)
        if value < best - 1e-12:
            best, best_plans = value, plans
    return best, best_plans


def test_a_tiny_instance_reaches_the_brute_force_optimum():
    problem = _tiny()
    best, plans = _brute_force(problem, EXACT)
    allocation = milp_allocate(problem, EXACT)
    assert allocation.status == "optimal"
    found = {g.job: g.plan for g in allocation.grants}
    assert _objective(problem, found, EXACT) == pytest.approx(best, abs=1e-9)
    assert found == plans  # the optimum is unique on this instance
    # What the optimum is, in words: the guarantee job gets its plan (2, then 3); the
    # small job, worth more per record (each is a bigger share of its work), gets 2
    # workers and finishes within the horizon (160 + 100 >= 180 records), and the big
    # one gives a worker up although its 50-s pause costs it 80 records.
    assert found == {"online": (2, 3), "small": (2, 1), "big": (1, 1)}
    assert allocation.granted() == {"online": 2, "small": 2, "big": 1}


def test_power_of_two_jobs_get_powers_of_two_within_capacity():
    jobs = tuple(
        ClusterJob(
            name=f"job{i}",
            job_class=JobClass.OPPORTUNISTIC,
            max_workers=16,
            remaining_work=3600.0 * (i + 1),
            power_of_two=True,
            current_workers=c,
            pause_s=30.0,
        )
        for i, c in enumerate((0, 3, 8))  # 3 is not a power of two: it must move
    )
    problem = ClusterProblem(jobs=jobs, capacity_workers=(13, 13, 13), step_s=300.0)
    for settings, steps in ((MilpSettings(), 1), (MilpSettings(integral_steps=3), 3)):
        allocation = milp_allocate(problem, settings)
        assert allocation.feasible
        for grant in allocation.grants:
            for count in grant.plan[:steps]:
                assert count == 0 or count & (count - 1) == 0, grant
        for t in range(steps):
            assert sum(g.plan[t] for g in allocation.grants) <= 13
        assert allocation.grants[1].granted_workers != 3
        assert allocation.used_workers >= 12  # not 13 idle workers left idle for nothing


def test_an_infeasible_pool_gives_a_reason_not_an_exception():
    problem = ClusterProblem(
        jobs=(
            ClusterJob(name="ads", job_class=JobClass.GUARANTEE, min_workers=5, max_workers=8),
            ClusterJob(name="serving", job_class=JobClass.SERVING, min_workers=4, max_workers=8),
            ClusterJob(name="batch", job_class=JobClass.OPPORTUNISTIC, remaining_work=10.0),
        ),
        capacity_workers=(6,),
    )
    allocation = milp_allocate(problem)
    assert not allocation.feasible
    assert "infeasible" in allocation.status
    assert "ads 5" in allocation.status and "serving 4" in allocation.status
    assert "6 workers" in allocation.status
    assert all(g.reason.startswith("unchanged: infeasible") for g in allocation.grants)


def test_guarantee_jobs_win_a_short_pool_and_the_shortfall_is_reported():
    problem = ClusterProblem(
        jobs=(
            ClusterJob(
                name="online",
                job_class=JobClass.GUARANTEE,
                current_workers=2,
                max_workers=10,
                demand_workers=(8,),
            ),
            ClusterJob(
                name="serving",
                job_class=JobClass.SERVING,
                current_workers=2,
                min_workers=0,
                max_workers=10,
                demand_workers=(3,),
            ),
            ClusterJob(
                name="batch",
                job_class=JobClass.OPPORTUNISTIC,
                current_workers=4,
                max_workers=10,
                remaining_work=1e6,
            ),
        ),
        capacity_workers=(10, 10),
    )
    allocation = milp_allocate(problem)
    granted = allocation.granted()
    assert granted == {"online": 8, "serving": 2, "batch": 0}
    serving = allocation.grants[1]
    assert serving.shortfall_workers == 1 and "SHORT by 1" in serving.reason
    assert "preempted" in allocation.grants[2].reason


def test_the_throttle_caps_the_opportunistic_jobs():
    jobs = tuple(
        ClusterJob(name=f"b{i}", job_class=JobClass.OPPORTUNISTIC, remaining_work=1e5)
        for i in range(3)
    )
    problem = ClusterProblem(jobs=jobs, capacity_workers=(30,), opportunistic_budget_workers=7)
    allocation = milp_allocate(problem)
    assert allocation.used_workers == 7
    assert any("capped at 7" in g.reason for g in allocation.grants)


def test_no_plan_within_the_time_limit_falls_back_to_the_greedy_rules():
    jobs = tuple(
        ClusterJob(
            name=f"b{i}",
            job_class=JobClass.OPPORTUNISTIC,
            remaining_work=1e4 * (i + 1),
            power_of_two=True,
            max_workers=16,
        )
        for i in range(12)
    )
    problem = ClusterProblem(jobs=jobs, capacity_workers=(40,) * 5, step_s=300.0)
    allocation = milp_allocate(problem, MilpSettings(time_limit_s=1e-9))
    assert allocation.solver == "greedy"
    assert "greedy fallback" in allocation.status
    assert allocation.feasible and 0 < allocation.used_workers <= 40


def _offline(name, work, arrived_s, current=0):
    return ClusterJob(
        name=name,
        job_class=JobClass.OPPORTUNISTIC,
        current_workers=current,
        max_workers=4,
        speed=SpeedCurve.prior(1.0, 4),
        remaining_work=work,
        arrived_s=arrived_s,
    )


def test_the_papers_hard_minimum_starts_every_job_the_pool_can_hold():
    # a job whose progress is worth little (huge work) waits under the soft penalty at 0
    # cost; ModelArts' Eq. 15 gives it its minimum anyway
    jobs = (_offline("short", 100.0, 0.0, current=2), _offline("huge", 1e9, 1.0))
    problem = ClusterProblem(jobs=jobs, capacity_workers=(4, 4), step_s=STEP_S)
    soft = milp_allocate(problem, MilpSettings(wait_penalty=0.0))
    hard = milp_allocate(problem, MilpSettings(wait_penalty=0.0, hard_minimum=True))
    assert soft.granted()["huge"] == 0
    assert hard.granted()["huge"] >= 1 and hard.solver == "milp"
    assert sum(hard.granted().values()) <= 4


def test_the_hard_minimum_covers_running_jobs_then_the_queue_while_it_fits():
    jobs = (
        _offline("late", 1e9, 3.0),
        _offline("running", 1e9, 5.0, current=1),
        _offline("early", 1e9, 1.0),
    )
    problem = ClusterProblem(jobs=jobs, capacity_workers=(2,), step_s=STEP_S)
    hard = milp_allocate(problem, MilpSettings(wait_penalty=0.0, hard_minimum=True))
    granted = hard.granted()
    assert granted["running"] >= 1 and granted["early"] >= 1 and granted["late"] == 0


def test_the_solve_stops_at_a_node_count_and_reports_its_nodes():
    settings = MilpSettings(node_limit=1, mip_rel_gap=0.0)
    allocation = milp_allocate(_tiny(), settings)
    assert allocation.solver_nodes <= 1 or allocation.solver == "greedy"
    with pytest.raises(ConfigError):
        MilpSettings(node_limit=0)
