"""Commands from the future and undecodable commands, at the applier and its consumer (no
broker: a counting executor and a fake producer)."""

import json
import logging
import time

import pytest

from streamtrain.config import KafkaSettings
from streamtrain.errors import ConfigError
from streamtrain.executors import ApplierSettings, CommandApplier, Outcome
from streamtrain.executors.consumer import CommandConsumer, ConsumerSettings
from streamtrain.proto import control_plane_pb2 as cp
from streamtrain.wire import decode, encode

NOW_S = 1_800_000_000.0
NOW_MS = int(NOW_S * 1000)
YEAR_MS = 365 * 86_400_000


class Pool:
    name = "counting"

    def __init__(self):
        self.workers = 2
        self.calls = []

    def current_workers(self):
        return self.workers

    def scale_to(self, target, command):
        self.calls.append(command.command_id)
        self.workers = target
        return target


class Producer:
    def __init__(self):
        self.sent = []

    def produce(self, topic, key, value):
        self.sent.append((topic, key, value))

    def poll(self, timeout):
        return 0


def command(command_id, target, created_at_ms):
    return cp.ScaleCommand(
        command_id=command_id, job="ctr", target_workers=target, created_at_ms=created_at_ms
    )


def applier(pool, journal, **settings):
    return CommandApplier(
        pool,
        ApplierSettings(journal_path=journal, **settings),
        sleep=lambda _: None,
        wall_clock=lambda: NOW_S,
    )


def test_a_command_from_the_future_is_refused_and_never_journaled(tmp_path):
    """A command dated a year ahead was applied and journaled, and every later command
    was SUPERSEDED, also after `scale apply` restarted."""
    journal = tmp_path / "applied.jsonl"
    pool = Pool()
    first = applier(pool, journal)
    refused = first.apply(command("skewed", 3, NOW_MS + YEAR_MS))
    assert refused.outcome is Outcome.FAILED and refused.attempts == 0
    assert "in the future" in refused.error and pool.calls == []
    assert not journal.exists() or "skewed" not in journal.read_text()
    restarted = applier(pool, journal)
    for index, target in enumerate((8, 5)):
        result = restarted.apply(command(f"ok{index}", target, NOW_MS + index))
        assert result.outcome is Outcome.APPLIED
    assert pool.workers == 5 and pool.calls == ["ok0", "ok1"]


def test_after_a_restart_a_command_from_the_future_holds_nothing_back(tmp_path):
    """The same on the wall clock, through `scale apply`'s restart (a new applier on the
    same journal), as an operator would meet it."""
    journal = tmp_path / "applied.jsonl"
    pool = Pool()
    now_ms = int(time.time() * 1000)
    CommandApplier(pool, ApplierSettings(journal_path=journal), sleep=lambda _: None).apply(
        command("skewed", 3, now_ms + YEAR_MS)
    )
    restarted = CommandApplier(pool, ApplierSettings(journal_path=journal), sleep=lambda _: None)
    outcomes = [restarted.apply(command(f"ok{i}", 8 + i, now_ms + i)).outcome for i in range(2)]
    assert outcomes == [Outcome.APPLIED, Outcome.APPLIED]
    assert pool.workers == 9


def test_within_the_clock_skew_allowed_a_command_is_applied(tmp_path):
    pool = Pool()
    result = applier(pool, None, max_clock_skew_s=60).apply(command("soon", 4, NOW_MS + 30_000))
    assert result.outcome is Outcome.APPLIED and pool.workers == 4


def test_a_future_dated_journal_line_no_longer_holds_back_newer_commands(tmp_path, caplog):
    """A journal written by a build that applied such a command is repaired on reading."""
    journal = tmp_path / "applied.jsonl"
    line = {"command_id": "skewed", "job": "ctr", "created_at_ms": NOW_MS + YEAR_MS}
    journal.write_text(json.dumps(line) + "\n")
    pool = Pool()
    with caplog.at_level(logging.WARNING):
        result = applier(pool, journal).apply(command("now", 6, NOW_MS))
    assert result.outcome is Outcome.APPLIED and pool.workers == 6
    assert "dated in the future" in caplog.text


def test_the_skew_must_not_be_negative():
    with pytest.raises(ConfigError, match="clock skew"):
        ApplierSettings(max_clock_skew_s=-1)


def test_undecodable_commands_are_counted_by_kind_and_alerted_once_per_kind(caplog):
    """An unknown enum value (a newer planner's reason) is one undecodable message, not a
    crash; a topic full of them is one alert and one log line per kind."""
    pool = Pool()
    consumer = CommandConsumer(
        KafkaSettings("localhost:9092"),
        CommandApplier(pool, sleep=lambda _: None, wall_clock=lambda: NOW_S),
        ConsumerSettings(job="ctr", alerts_topic="alerts"),
        clock=lambda: NOW_S,
    )
    consumer._producer = Producer()
    newer = encode(cp.ScaleCommand(command_id="c", job="ctr", target_workers=3, reason=7))  # type: ignore[arg-type]
    with caplog.at_level(logging.DEBUG, logger="streamtrain"):
        handled = [consumer.handle(value, offset) for offset, value in enumerate([newer] * 5)]
        handled += [consumer.handle(b"\xff\xff", 5), consumer.handle(None, 6)]
    assert all(h.result is None and h.skipped for h in handled)
    assert dict(consumer.undecodable.by_kind) == {"unknown_enum": 5, "unparsable": 1, "no_value": 1}
    alerts = [decode(cp.Alert, value) for _, _, value in consumer._producer.sent]
    assert len(alerts) == 3 and all(a.state == "scale_rejected" for a in alerts)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 3
    assert pool.calls == []
    good = encode(command("good", 4, int(NOW_S * 1000)))
    applied = consumer.handle(good, 7).result
    assert applied is not None and applied.outcome is Outcome.APPLIED
