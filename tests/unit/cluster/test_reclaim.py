"""FaPES reclaim: the worked example of §3.4 (Fig. 6(a)), the rule at worker granularity,
and the one-way baseline."""

import pytest

from streamtrain.cluster.reclaim import (
    reclaim,
    reclaim_cost,
    reclaim_gain,
    reclaim_lifo,
    reclaim_workers,
)
from streamtrain.errors import ConfigError

# Fig. 6(a): servers 1 and 2 both hold jobs A and B; N_r = 2. Servers 3 and 4 are
# other loaned servers (each shared by two other jobs, one of them also on server 1's
# neighbour) so that a careless pick of two servers would preempt more jobs.
FIG6A = {
    "server1": frozenset({"A", "B"}),
    "server2": frozenset({"A", "B"}),
    "server3": frozenset({"A", "C"}),
    "server4": frozenset({"D", "E"}),
}


def test_fig6a_costs_and_gains_as_the_text_gives_them():
    none: frozenset[str] = frozenset()
    # "Reclaim costs of both server 1 and server 2 are 2, since they are holding job A
    # and job B. The reclaim gain of server 1 is 2, since server 1 and server 2 become
    # available when suspending jobs A and B on server 1."
    assert reclaim_cost(FIG6A["server1"], none) == 2
    assert reclaim_cost(FIG6A["server2"], none) == 2
    assert reclaim_gain("server1", FIG6A, none) == 2
    # "After reclaiming server 1, the reclaim cost of server 2 reduces to 0, because job
    # A and job B are both terminated."
    assert reclaim_cost(FIG6A["server2"], FIG6A["server1"]) == 0


def test_fig6a_reclaims_server1_and_server2_at_a_total_cost_of_2():
    chosen = reclaim(FIG6A, 2)
    assert chosen.servers == ("server1", "server2")
    assert chosen.cost == 2
    assert chosen.preempted_jobs == {"A", "B"}


def test_a_gain_larger_than_needed_is_passed_over_for_one_that_fits():
    servers = {
        "big1": frozenset({"X"}),
        "big2": frozenset({"X"}),
        "big3": frozenset({"X"}),
        "small": frozenset({"Y"}),
    }
    assert reclaim(servers, 1).servers == ("small",)
    assert reclaim(servers, 3).servers == ("big1", "big2", "big3")


def test_worker_granularity_shrinks_before_it_stops_and_disrupts_few_jobs():
    # Need 3: shrinking a (4 -> 1) frees exactly 3 at the cost of one disruption;
    # stopping c (2 workers, cost 2) would free less for more.
    assert reclaim_workers({"a": 4, "b": 8, "c": 2}, 3) == {"a": 3}
    # Need 2 from a job of 8 and one of 3: b shrinks to 1 (gain 2 fits exactly).
    assert reclaim_workers({"a": 8, "b": 3}, 2) == {"b": 2}
    # Need everything: both jobs stop.
    assert reclaim_workers({"a": 2, "b": 1}, 3) == {"a": 2, "b": 1}


def test_one_way_takes_back_the_newest_loans_first():
    loans = [("a", 3), ("b", 2), ("c", 4)]
    assert reclaim_lifo(loans, 5) == {"c": 4, "b": 1}
    assert reclaim_lifo(loans, 0) == {}


def test_bad_requests_are_config_errors():
    with pytest.raises(ConfigError, match="only 4"):
        reclaim(FIG6A, 5)
    with pytest.raises(ConfigError, match="negative"):
        reclaim(FIG6A, -1)
