"""The sender's receiver list and the receiver's credit ledger (no sockets)."""

import collections

from streamtrain.shuffle.inflight import InFlightBatches
from streamtrain.shuffle.membership import PeerInfo
from streamtrain.shuffle.policy import ShufflePolicy
from streamtrain.shuffle.receivers import CreditLedger, ReceiverList
from streamtrain.testing import records

ADV, BASIC, NONE = ShufflePolicy.ADVANCED, ShufflePolicy.BASIC, ShufflePolicy.NONE


def _peer(worker, incarnation=1):
    return PeerInfo(worker, f"tcp://127.0.0.1:1{len(worker)}", "tcp://127.0.0.1:2", incarnation)


def _list(*workers, window=100):
    receivers = ReceiverList(window, seed=7)
    receivers.sync({w: _peer(w) for w in workers})
    return receivers


def test_only_peers_announcing_receiving_are_available_for_advanced():
    receivers = _list("a", "b", "c")
    assert receivers.available(0.0, ADV) == []
    assert receivers.on_state("a", True, 1)
    assert receivers.on_state("b", True, 1)
    assert receivers.available(0.0, ADV) == ["a", "b"]
    assert receivers.available(0.0, BASIC) == ["a", "b", "c"]
    assert receivers.available(0.0, NONE) == []


def test_stale_events_are_ignored():
    receivers = _list("a")
    assert receivers.on_state("a", True, 5)
    assert not receivers.on_state("a", False, 4)
    assert not receivers.on_state("a", False, 5)
    assert receivers.available(0.0, ADV) == ["a"]
    assert not receivers.on_state("zz", True, 9)


def test_new_incarnation_resets_sequence_and_what_was_heard():
    receivers = _list("a")
    receivers.on_state("a", True, 50)
    receivers.heard("a", 5.0)
    diff = receivers.sync({"a": _peer("a", incarnation=2)})
    assert [p.incarnation for p in diff.removed] == [1]
    assert [p.incarnation for p in diff.added] == [2]
    assert receivers.heard_at("a") == float("-inf")
    assert receivers.on_state("a", True, 1)


def test_removed_peer_disappears():
    receivers = _list("a", "b")
    diff = receivers.sync({"b": _peer("b")})
    assert [p.worker_id for p in diff.removed] == ["a"]
    assert "a" not in receivers
    assert len(receivers) == 1


def test_credit_and_suppression_gate_availability():
    receivers = _list("a", "b")
    receivers.on_state("a", True, 1)
    receivers.on_state("b", True, 1)
    assert receivers.available(0.0, ADV, {"a": 100}) == ["b"]  # a's window is in flight
    assert receivers.credit("a", 70) == 30
    assert receivers.credit("a", 0) == 100
    assert receivers.credit("zz", 0) == 0  # not a peer
    receivers.suppress("b", until=10.0)
    assert receivers.available(5.0, ADV, {"a": 70}) == ["a"]
    assert receivers.available(10.0, ADV) == ["a", "b"]
    receivers.suppress("b", until=20.0)
    receivers.unsuppress("b")
    assert receivers.available(11.0, ADV) == ["a", "b"]


def test_credit_heals_itself_whatever_answers_are_lost():
    """Credit came back only through CreditGrant messages, and a grant
    sent to a momentarily unknown identity vanished: repeated blips drove a peer's credit
    to 0 for good. Credit is now the window less what is in flight, and every batch
    leaves the in-flight set exactly once (answered, timed out or its receiver gone)."""
    receivers = _list("a", window=100)
    receivers.on_state("a", True, 1)
    flights = InFlightBatches(1, ack_timeout_s=1.0)
    now = 0.0
    for _ in range(50):  # 50 blips: every batch's answer is lost, each times out
        in_flight = flights.records_to()
        assert receivers.choose(now, ADV, in_flight) == "a"
        budget = receivers.credit("a", in_flight.get("a", 0))
        assert budget == 100
        flights.sent(flights.next_id(), "a", records(0, budget), now)
        assert receivers.available(now, ADV, flights.records_to()) == []  # window used up
        now += 1.0
        assert len(flights.expired(now)) == 1
    assert receivers.credit("a", flights.records_to().get("a", 0)) == 100


def test_left_peer_is_never_chosen_and_ignores_later_states():
    receivers = _list("a")
    receivers.on_state("a", True, 1)
    assert receivers.on_left("a")
    assert not receivers.on_state("a", True, 2)
    assert receivers.choose(0.0, ADV) is None


def test_choice_is_uniform_over_available():
    receivers = _list("a", "b", "c", "d")
    for worker in "abc":
        receivers.on_state(worker, True, 1)
    picks = collections.Counter(receivers.choose(0.0, ADV) for _ in range(3000))
    assert set(picks) == {"a", "b", "c"}
    assert all(900 < count < 1100 for count in picks.values())


def test_ledger_admits_within_window_and_frees_on_training():
    ledger = CreditLedger(100)
    assert ledger.admit("s", 60)
    assert ledger.admit("s", 40)
    assert not ledger.admit("s", 1)
    ledger.trained("s", 10)
    ledger.trained("s", 20)
    assert ledger.outstanding("s") == 70
    assert ledger.admit("s", 30)
    assert not ledger.admit("s", 1)
    ledger.trained("s", 1000)  # never below zero
    assert ledger.outstanding("s") == 0
    ledger.trained("unknown", 5)
    assert ledger.outstanding("unknown") == 0


def test_ledger_release_and_reset():
    ledger = CreditLedger(100)
    assert ledger.admit("s", 100)
    ledger.release("s", 100)
    assert ledger.admit("s", 100)
    ledger.reset("s")
    assert ledger.outstanding("s") == 0
    assert ledger.admit("s", 100)
