"""The sender's receiver list and the receiver's credit ledger (no sockets)."""

import collections

from streamtrain.shuffle.membership import PeerInfo
from streamtrain.shuffle.policy import ShufflePolicy
from streamtrain.shuffle.receivers import CreditLedger, ReceiverList

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


def test_new_incarnation_resets_sequence_and_credit():
    receivers = _list("a")
    receivers.on_state("a", True, 50)
    receivers.spend("a", 100)
    diff = receivers.sync({"a": _peer("a", incarnation=2)})
    assert [p.incarnation for p in diff.removed] == [1]
    assert [p.incarnation for p in diff.added] == [2]
    assert receivers.credit("a") == 100
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
    receivers.spend("a", 100)
    assert receivers.available(0.0, ADV) == ["b"]
    receivers.on_credit("a", 30)
    assert receivers.credit("a") == 30
    receivers.suppress("b", until=10.0)
    assert receivers.available(5.0, ADV) == ["a"]
    assert receivers.available(10.0, ADV) == ["a", "b"]
    receivers.suppress("b", until=20.0)
    receivers.unsuppress("b")
    assert receivers.available(11.0, ADV) == ["a", "b"]
    receivers.on_credit("a", 1000)
    assert receivers.credit("a") == 100  # never above the window


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


def test_ledger_admits_within_window_and_coalesces_grants():
    ledger = CreditLedger(100)
    assert ledger.admit("s", 60)
    assert ledger.admit("s", 40)
    assert not ledger.admit("s", 1)
    assert ledger.trained("s", 10) == 0  # below a quarter window: coalesced
    assert ledger.trained("s", 20) == 30
    assert ledger.outstanding("s") == 70
    assert ledger.admit("s", 30)
    assert ledger.trained("s", 100) == 100  # nothing outstanding: grant the rest
    assert ledger.trained("unknown", 5) == 0


def test_ledger_release_and_reset():
    ledger = CreditLedger(100)
    assert ledger.admit("s", 100)
    ledger.release("s", 100)
    assert ledger.admit("s", 100)
    ledger.reset("s")
    assert ledger.outstanding("s") == 0
    assert ledger.admit("s", 100)
