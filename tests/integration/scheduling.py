"""Which tests share one pytest process when the suite runs in parallel (``make test``).

``make test`` runs pytest-xdist with ``--dist loadgroup``; tests/conftest.py gives it the
scheduler defined by this module's lists:

* :data:`HEAVY_TESTS`, the longest end-to-end runs (the demo's days, the chaos soak, the
  24-worker shard job, a torchft job, the transformer planner), are one unit: one process
  runs them one after another, and they come first (tests/conftest.py sorts them to the
  front), so their chain starts at once. One at a time, they never compete with each
  other for the machine's two cores. The chain sets the suite's time (680 of 715 s on
  a quiet machine), so shorter runs of a few processes (the DDP example, the demo
  stopped by Ctrl-C) stay out of it and go to whichever process is free.
* each module of :data:`MODULE_UNITS` goes to one process whole: its module-scoped
  fixture (a Prometheus stack, a shuffle run, a client set-up) is started once.
* every other test goes, one at a time, to whichever process is free;
  :data:`LATE_TESTS` go last, when only the heavy chain still loads the machine: they
  depend on the embedded broker's timing under load (Tansu's cooperative rebalances
  slow down on a loaded machine).

The nodeids are listed here, not marked on the tests, because the controller process
that schedules sees only nodeids (and ``xdist_group`` marks no longer reach it under
pytest 9.2: the worker's rename of the nodeid is lost). tests/unit/test_scheduling.py
checks that every listed test exists.
"""

HEAVY_GROUP = "heavy"

HEAVY_TESTS = frozenset(
    {
        "tests/integration/test_chaos.py::test_every_fault_once_loses_no_record",
        "tests/integration/test_demo.py::"
        "test_a_short_day_trains_every_record_through_a_killed_worker_and_the_dashboard_shows_it",
        "tests/integration/test_demo.py::"
        "test_attached_to_a_cluster_it_uses_an_existing_topic_from_its_end",
        "tests/integration/test_elastic_scaling.py::"
        "test_a_worker_that_never_says_ready_is_not_admitted_and_is_replaced",
        "tests/integration/test_live_forecast.py::"
        "test_the_planner_forecasts_with_the_transformer_refits_and_reloads",
        "tests/integration/test_shards.py::test_24_workers_on_16_partitions_all_train",
    }
)

LATE_TESTS = frozenset(
    {
        "tests/integration/test_cooperative.py::"
        "test_cooperative_join_and_leave_keep_every_partition_consumed",
    }
)

MODULE_UNITS = frozenset(
    {
        "tests/integration/test_clients.py",
        "tests/integration/test_prometheus.py",
        "tests/integration/test_shuffle_table2.py",
    }
)


def order_of(nodeid: str) -> int:
    """Where ``nodeid`` goes in the run: 0 the heavy chain, first; 2 the late tests,
    last; 1 every other test, in file order."""
    if nodeid in HEAVY_TESTS:
        return 0
    return 2 if nodeid in LATE_TESTS else 1


def unit_of(nodeid: str) -> str | None:
    """The scheduling unit of ``nodeid`` (a name shared by the tests that run together in
    one process), or None for a test handed out alone."""
    if nodeid in HEAVY_TESTS:
        return HEAVY_GROUP
    path = nodeid.split("::", 1)[0]
    return path if path in MODULE_UNITS else None
