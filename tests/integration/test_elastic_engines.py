"""One model on many workers, with real processes: torchft's lighthouse and ranks on gloo
(127.0.0.1), torchrun for torchelastic. The ranks are scripted
(``elastic_rank.py``: a small MLP on in-memory batches of record ids) so each test
controls exactly who has which data and when a fault hits; every id is checked."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from streamtrain.ports import free_port
from tests.integration.elastic_job import REPO, Ranks, batches, start_lighthouse
from tests.integration.elastic_rank import features, make_app

ROUNDS = 15


@pytest.fixture
def lighthouse(tmp_path):
    process = start_lighthouse(tmp_path)
    yield process
    process.stop()


@pytest.fixture
def ranks(tmp_path, lighthouse):
    job = Ranks(tmp_path, lighthouse.address)
    yield job
    job.stop_all()


def assert_same_state(a, b, atol=1e-6):
    assert a.keys() == b.keys()
    for key in a:
        assert torch.allclose(a[key], b[key], atol=atol), key


def planned_ids(plan):
    return sorted(i for batch in plan for i in batch)


def replay(job, names, hidden=16, last_step=None):
    """The weights one process gets by an SGD step on every committed step's records
    (all workers' together, as the logs say) up to ``last_step``, from the same initial
    weights."""
    app = make_app(hidden, 0, set())
    steps: dict[int, list[int]] = defaultdict(list)
    for name in names:
        for row in job.rows(name):
            if "trained" in row:
                steps[row["step"]].extend(row["trained"])
    for step in sorted(steps):
        if last_step is not None and step > last_step:
            break
        app.optimizer.zero_grad()
        x, y = features(np.asarray(steps[step], dtype=np.int64))
        loss = torch.nn.functional.binary_cross_entropy_with_logits(app.model(x).squeeze(1), y)
        loss.backward()
        app.optimizer.step()
    return app.model.state_dict(), steps


def last_committed_step(job, name):
    return max(r["step"] for r in job.rounds(name) if r["committed"])


def test_unequal_data_is_weighted_by_records_as_one_process_would(ranks):
    a, b = batches(0, 3, ROUNDS), batches(1_000, 7, ROUNDS)
    ranks.start("a", a, start_world=2)
    ranks.start("b", b, start_world=2)
    for name in "ab":
        assert ranks.wait(name) == 0, ranks.stderr(name)
    # each rank decides alone when the world reached two, so one may start its planned
    # rounds a step later than the other and step its last round alone
    assert_one_model(ranks, "ab", at_least=ROUNDS - 1)
    _, steps = replay(ranks, "ab")
    for name in "ab":
        reference, _ = replay(ranks, "ab", last_step=last_committed_step(ranks, name))
        assert_same_state(ranks.state(name), reference)
    assert sorted(i for ids in steps.values() for i in ids) == planned_ids(a) + planned_ids(b)
    assert sum(len(ids) == 10 for ids in steps.values()) >= ROUNDS - 1  # mostly 3 + 7
    assert sorted(ranks.acked("a")) == planned_ids(a)
    assert sorted(ranks.acked("b")) == planned_ids(b)


def test_a_rank_with_no_data_steps_empty_and_nothing_hangs(ranks):
    a = batches(0, 5, ROUNDS)
    ranks.start("a", a, start_world=2)
    ranks.start("b", [[] for _ in range(ROUNDS)], start_world=2)
    for name in "ab":
        assert ranks.wait(name) == 0, ranks.stderr(name)
    empty = ranks.rounds("b")
    assert len(empty) == ROUNDS
    assert all(r["committed"] and r["records"] == 0 for r in empty)
    assert any(r["world"] == 2 and r["records_global"] == 5 for r in empty)
    reference, _ = replay(ranks, "ab", last_step=last_committed_step(ranks, "b"))
    assert_same_state(ranks.state("b"), reference)
    assert sorted(ranks.acked("a")) == planned_ids(a)


def test_kill_9_mid_step_commits_no_step_with_its_gradient(ranks, tmp_path):
    marker = tmp_path / "c-in-step"
    plans = {n: batches(i * 10_000, 4, 40) for i, n in enumerate("abc")}
    for name in "ab":
        ranks.start(name, plans[name], timeout_s=60.0, step_sleep_s=0.02, start_world=3)
    ranks.start(
        "c",
        plans["c"],
        start_world=3,
        timeout_s=60.0,
        step_sleep_s=0.02,
        slow={"round": 6, "seconds": 120, "marker": str(marker)},
    )
    ranks.wait_for_file(marker)
    time.sleep(0.5)  # the others wait in the step's all-reduce for c's gradient
    ranks.kill("c")
    for name in "ab":
        assert ranks.wait(name) == 0, ranks.stderr(name)
        assert sorted(set(ranks.acked(name))) == planned_ids(plans[name])
    # every committed step holds exactly the records of the ranks that committed it
    committed: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
    for name in "abc":
        for row in ranks.rounds(name):
            if row["committed"]:
                committed[row["step"]][name] = row
    for step, rows in committed.items():
        totals = {row["records_global"] for row in rows.values()}
        assert totals == {sum(row["records"] for row in rows.values())}, (step, rows)
    failed = [r for n in "ab" for r in ranks.rounds(n) if not r["committed"]]
    assert failed, "the kill hit no step"
    assert all(r["records"] == 0 for r in failed)
    assert any(r["world"] == 2 for r in ranks.rounds("a") if r["committed"])


def test_a_drained_leaver_finishes_its_step_and_the_others_fail_none(ranks):
    plans = {n: batches(i * 10_000, 4, 300) for i, n in enumerate("ab")}
    for name in "ab":
        ranks.start(name, plans[name], step_sleep_s=0.01, start_world=2)
    ranks.wait_rounds("b", 20)
    ranks.kill("b", signal.SIGTERM)
    assert ranks.wait("b") == 0, ranks.stderr("b")
    assert ranks.wait("a") == 0, ranks.stderr("a")
    left = ranks.rounds("b")
    assert left and all(r["committed"] for r in left)
    trained_b = {i for r in left for i in r["ids"]}
    assert set(ranks.acked("b")) == trained_b
    after = [r for r in ranks.rounds("a") if r["t"] > left[-1]["t"]]
    assert after and all(r["committed"] for r in after)  # a graceful leave fails no step
    assert after[-1]["world"] == 1
    assert sorted(set(ranks.acked("a"))) == planned_ids(plans["a"])


def assert_one_model(job, names, at_least):
    """Wherever every one of ``names`` committed a step, they hold the same weights."""
    checksums: dict[int, dict[str, float]] = defaultdict(dict)
    for name in names:
        for row in job.rounds(name):
            if row["committed"]:
                checksums[row["step"]][name] = row["checksum"]
    shared = [step for step, seen in checksums.items() if len(seen) == len(names)]
    assert len(shared) >= at_least
    for step in shared:
        values = list(checksums[step].values())
        assert values == pytest.approx([values[0]] * len(values), abs=1e-9), step


def test_training_waits_for_a_killed_lighthouse_and_resumes(tmp_path):
    # two workers and --min-replicas 2: neither may form a quorum alone while the other
    # is out of sight of the restarted lighthouse (which would train two models apart)
    lighthouse = start_lighthouse(tmp_path, min_replicas=2)
    assert lighthouse.address is not None
    port = int(lighthouse.address.rsplit(":", 1)[1])
    job = Ranks(tmp_path, lighthouse.address)
    plans = {n: batches(i * 10_000, 4, 150) for i, n in enumerate("ab")}
    try:
        for name in "ab":
            job.start(name, plans[name], step_sleep_s=0.02, start_world=2)
        job.wait_rounds("a", 10)
        assert lighthouse.process is not None
        lighthouse.process.kill()
        lighthouse.stop()
        killed_at = time.time()
        time.sleep(3.0)
        before = len(job.rounds("a"))
        restarted = start_lighthouse(tmp_path, port=port, min_replicas=2)
        try:
            for name in "ab":
                assert job.wait(name) == 0, job.stderr(name)
        finally:
            restarted.stop()
        assert before < 150, "the outage came after the training"
        for name in "ab":
            assert sorted(set(job.acked(name))) == planned_ids(plans[name])
            quiet = [
                r
                for r in job.rounds(name)
                if r["committed"] and killed_at + 1.0 < r["t"] < killed_at + 3.0
            ]
            assert not quiet, "a step committed while the lighthouse was down"
        assert_one_model(job, "ab", at_least=100)
    finally:
        job.stop_all()
        lighthouse.stop()


def test_workers_that_hold_different_weights_are_caught_and_healed(ranks):
    plans = {n: batches(i * 10_000, 4, 30) for i, n in enumerate("ab")}
    ranks.start("a", plans["a"], start_world=2, perturb_round=10)
    ranks.start("b", plans["b"], start_world=2)
    for name in "ab":
        assert ranks.wait(name) == 0, ranks.stderr(name)
    caught = [r for r in ranks.rounds("a") if r["round"] == 10]
    assert caught and not caught[0]["committed"]  # the round with two models trains nothing
    for name in "ab":  # one model is kept: the others step back once and heal from it
        newest = 0
        for row in ranks.rounds(name):
            assert row["step"] >= newest - 1, (name, row)
            newest = max(newest, row["step"])
    assert_one_model(ranks, "ab", at_least=25)
    for name in "ab":
        assert sorted(set(ranks.acked(name))) == planned_ids(plans[name])


def test_a_joiner_with_another_model_is_refused_and_never_joins(ranks):
    plans = {"a": batches(0, 4, 400)}
    # a stays in the job until b is done, however slowly b starts on a busy machine
    b_done = ranks.dir / "b-done"
    ranks.start("a", plans["a"], step_sleep_s=0.01, hold_until=str(b_done))
    ranks.wait_rounds("a", 10)
    ranks.start("b", batches(50_000, 4, 50), hidden=24)
    assert ranks.wait("b") == 3
    b_done.touch()
    assert "not this worker's model" in ranks.stderr("b")
    assert "0.weight" in ranks.stderr("b")
    assert not [r for r in ranks.rows("b") if "joined" in r or "round" in r]
    assert ranks.wait("a") == 0, ranks.stderr("a")
    assert sorted(set(ranks.acked("a"))) == planned_ids(plans["a"])


def test_an_unreachable_lighthouse_is_a_clear_error_naming_it(tmp_path):
    port = free_port()
    job = Ranks(tmp_path, f"127.0.0.1:{port}")
    job.start("a", batches(0, 4, 3), connect_timeout_s=1.0)
    try:
        assert job.wait("a", 60) == 3
    finally:
        job.stop_all()
    assert f"no torchft lighthouse answered at http://127.0.0.1:{port}" in job.stderr("a")


def test_a_bad_batch_is_refused_and_the_rank_steps_empty(ranks):
    a, b = batches(0, 4, ROUNDS), batches(1_000, 4, ROUNDS)
    ranks.start("a", a, poison=[a[5][0]], start_world=2)
    ranks.start("b", b, start_world=2)
    for name in "ab":
        assert ranks.wait(name) == 0, ranks.stderr(name)
    refused = [r for r in ranks.rows("a") if "dead_letters" in r]
    assert refused and refused[0]["dead_letters"] == [a[5][0]]  # alone: halves retried
    bad_round = next(r for r in ranks.rounds("a") if r["ids"] == a[5])
    assert bad_round["committed"] and bad_round["records"] == 0
    assert bad_round["records_global"] == 4  # b's records alone
    assert sorted(ranks.acked("a")) == sorted(set(planned_ids(a)) - {a[5][0]})
    assert all(torch.isfinite(v).all() for v in ranks.state("a").values())


def torchrun_group(tmp_path: Path, plan: dict[str, object]) -> None:
    """Two ranks of ``plan`` under ``torchrun --standalone``, to their end (they must
    exit 0). The plan is rewritten each time: a second call restarts the group."""
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    torchrun = Path(sys.executable).with_name("torchrun")
    argv = [
        str(torchrun), "--standalone", "--nproc-per-node", "2",
        "-m", "tests.integration.elastic_rank", str(tmp_path / "plan.json"),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO), "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
    result = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, timeout=180)
    assert result.returncode == 0, result.stderr.decode()[-3000:]


def test_torchelastic_ranks_that_start_apart_meet_within_the_connect_timeout(tmp_path):
    # Rank 0 (which serves the rendezvous store) starts 4 s after rank 1, longer than
    # the collectives' 1.5-s timeout and within the 60-s connect timeout: a busy
    # machine importing torch. The rendezvous waits by the connect timeout.
    planned = [batches(rank * 10_000, 4, 3) for rank in range(2)]
    per_rank = [
        {
            "name": f"r{rank}",
            "batches": planned[rank],
            "out": str(tmp_path / f"r{rank}.jsonl"),
            "join_delay_s": 4.0 if rank == 0 else 0.0,
        }
        for rank in range(2)
    ]
    plan = {
        "engine": "torchelastic",
        "per_rank": per_rank,
        "checkpoint_dir": str(tmp_path / "checkpoints"),
        "checkpoint_every": 1,  # every step durable once the next round says it was saved
        "timeout_s": 1.5,
        "connect_timeout_s": 60.0,
    }
    torchrun_group(tmp_path, plan)
    job = Ranks(tmp_path)
    for rank in range(2):
        assert [r["step"] for r in job.rounds(f"r{rank}")] == [1, 2, 3]
        first_two = planned_ids(planned[rank][:2])
        assert sorted(job.acked(f"r{rank}")) == sorted(first_two)


def test_torchelastic_acknowledges_only_what_a_checkpoint_holds(tmp_path):
    checkpoints = tmp_path / "checkpoints"
    per_rank = [
        {
            "name": f"r{rank}",
            "batches": batches(rank * 10_000, 4, 12),
            "out": str(tmp_path / f"r{rank}.jsonl"),
        }
        for rank in range(2)
    ]
    plan = {
        "engine": "torchelastic",
        "per_rank": per_rank,
        "checkpoint_dir": str(checkpoints),
        "checkpoint_every": 5,
    }
    torchrun_group(tmp_path, plan)
    job = Ranks(tmp_path)
    for rank in range(2):
        name = f"r{rank}"
        rounds = job.rounds(name)
        assert [r["step"] for r in rounds] == list(range(1, 13))
        durable_ids = {i for r in rounds if r["step"] <= 10 for i in r["ids"]}
        assert set(job.acked(name)) == durable_ids  # step 11 and 12: no checkpoint yet
        nacked = {i for r in job.rows(name) if "nacked" in r for i in r["nacked"]}
        assert nacked == {i for r in rounds if r["step"] > 10 for i in r["ids"]}
    assert sorted(p.name for p in checkpoints.iterdir()) == ["step-10.state", "step-5.state"]
    # a restarted group resumes from the newest durable checkpoint
    for rank in range(2):
        per_rank[rank]["batches"] = batches(50_000 + rank * 1_000, 4, 2)
        per_rank[rank]["out"] = str(tmp_path / f"again{rank}.jsonl")
    torchrun_group(tmp_path, plan)
    assert [r["joined"] for r in job.rows("again0") if "joined" in r] == [10]
    assert [r["step"] for r in job.rounds("again0")] == [11, 12]
