"""AckLedger, model-based: random histories of commits, failures and durable steps
against a plain reference, checking that offsets follow the durable step."""

import random

import pytest

from streamtrain.elastic.ledger import AckLedger


def test_a_committed_batch_waits_for_its_step_to_be_durable():
    ledger: AckLedger[object] = AckLedger()
    assert ledger.committed(1, "a").ack == ()
    assert ledger.committed(2, "b").ack == ()
    assert ledger.durable(1).ack == ("a",)
    assert ledger.held_steps == (2,)
    assert ledger.committed(2, "c").ack == ()
    assert ledger.release_all().nack == ("b", "c")
    assert len(ledger) == 0


def test_a_failed_step_is_handed_back_at_once():
    assert AckLedger.failed("x").nack == ("x",)


def test_a_step_older_than_one_held_is_refused():
    ledger: AckLedger[object] = AckLedger()
    ledger.committed(5, "a")
    with pytest.raises(ValueError, match="step 4 committed after step 5"):
        ledger.committed(4, "b")


def test_durable_never_goes_back():
    ledger: AckLedger[object] = AckLedger()
    ledger.durable(5)
    assert ledger.durable(3).ack == ()
    assert ledger.durable_step == 5


@pytest.mark.parametrize("seed", range(200))
def test_random_histories_match_the_reference(seed):
    rng = random.Random(seed)  # noqa: S311 - a seeded history, not a secret
    ledger: AckLedger[object] = AckLedger()
    step = durable = 0
    fate: dict[int, str] = {}
    trained_at: dict[int, int] = {}
    committed: set[int] = set()
    pending: set[int] = set()

    def apply(settled):
        for item in settled.ack:
            assert item not in fate, "a batch settled twice"
            assert trained_at[item] <= durable, "acked before its step was durable"
            fate[item] = "ack"
            pending.discard(item)
        for item in settled.nack:
            assert item not in fate, "a batch settled twice"
            fate[item] = "nack"
            pending.discard(item)

    for item in range(60):
        action = rng.random()
        if action < 0.55:  # a round that committed
            step += 1
            trained_at[item] = step
            committed.add(item)
            pending.add(item)
            apply(ledger.committed(step, item))
        elif action < 0.7:  # a round that did not commit
            trained_at[item] = step + 1
            apply(AckLedger.failed(item))
        else:  # a checkpoint became durable
            durable = rng.randint(durable, step)
            apply(ledger.durable(durable))
        # reference: exactly the committed items above the durable step are held
        assert pending == {i for i in pending if trained_at[i] > durable}
        assert len(ledger) == len(pending)
    apply(ledger.release_all())
    assert set(fate) == set(trained_at), "every batch leaves the ledger"
    for item, at in trained_at.items():
        durable_then = item in committed and at <= durable
        assert fate[item] == ("ack" if durable_then else "nack"), (item, at, durable)
