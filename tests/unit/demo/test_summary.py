"""The demo's summary and its parts, without a broker: metrics, AUC, the files it tails."""

import json
from pathlib import Path

import numpy as np
import pytest

from streamtrain.demo.observe import StatsTail, Timeline, TrainedIds, planner_forecast
from streamtrain.demo.settings import DemoSettings
from streamtrain.demo.summary import (
    RecordCounts,
    engine_summary,
    format_summary,
    summarize,
    workers_at,
)
from streamtrain.demo.trainer import DemoWorkerConfig, roc_auc
from streamtrain.errors import ConfigError
from streamtrain.executors import ApplyResult, Outcome
from streamtrain.ports import free_port
from streamtrain.scale.action_costs import ActionCostEstimate

T0 = 1_800_000_000.0


def _timeline(**series):
    base: dict[str, list[object]] = {
        "reports": [],
        "alerts": [],
        "commands": [],
        "actions": [],
        "workers": [],
        "auc": [],
    }
    return base | series


def test_summary_metrics_follow_kale():
    reports = [
        {"at_s": T0 + k, "max_lag_s": lag} for k, lag in enumerate([0.0, 1.0, 3.0, 3.0, None])
    ]
    workers = [(T0 - 5, 2), (T0 + 1.5, 4), (T0 + 3.5, 1)]
    summary = summarize(
        _timeline(
            reports=reports,
            workers=workers,
            actions=[{"outcome": "applied"}, {"outcome": "duplicate"}, {"outcome": "applied"}],
            auc=[(T0 + 1, 0.7), (T0 + 2, 0.8), (T0 - 10, 0.1)],
            commands=[
                {
                    "at_s": T0 + 1.5,
                    "current_workers": 2,
                    "target_workers": 4,
                    "reason": "PROACTIVE",
                    "explanation": "why",
                }
            ],
        ),
        started_at_s=T0,
        day_end_s=T0 + 4,
        ended_at_s=T0 + 4,
        peak_at_s=T0 + 2,
        speed=60.0,
        slo_lag_s=2.0,
        records=RecordCounts(
            produced=100, trained_unique=98, trained_total=105, trained_from_peers=12
        ),
    )
    assert summary["slo_violation_rate"] == pytest.approx(2 / 5)
    # Eq. 11 in simulated minutes: lag (s) x 60 / 60 per simulated minute, 1 min per tick.
    assert summary["accumulated_lag_min"] == pytest.approx(1.0 + 3.0 + 3.0 + 0.0)
    assert summary["peak_lag_s"] == 3.0
    assert summary["scaling_actions"] == 2
    assert summary["worker_minutes"] == pytest.approx((2 * 1.5 + 4 * 2 + 1 * 0.5) / 60, abs=0.01)
    assert summary["workers"] | {} == {
        "at_start": 2,
        "at_peak": 4,
        "max": 4,
        "at_day_end": 1,
        "scaled_up_before_peak": True,
        "scaled_down_after_peak": True,
    }
    assert summary["auc"] == {"mean": 0.75, "last": 0.8, "evaluations": 2}
    assert summary["records"]["lost"] == 2 and summary["records"]["duplicates"] == 7
    assert summary["actions"][0]["at_simulated"] == "00:01"
    text = format_summary(summary)
    assert "2 lost" in text and "40.0 %" in text
    assert summary["records"]["trained_from_peers"] == 12 and "12 trained by a peer" in text


def test_the_fallback_share_counts_the_days_actions_not_the_drains():
    def command(at_s: float, reason: str) -> dict[str, object]:
        return {
            "at_s": at_s,
            "current_workers": 2,
            "target_workers": 3,
            "reason": reason,
            "explanation": reason.lower(),
        }

    day = [command(T0 + 1, "PROACTIVE"), command(T0 + 2, "FALLBACK"), command(T0 + 3, "PROACTIVE")]
    drain = [command(T0 + 4.5, "FALLBACK"), command(T0 + 5, "PROACTIVE")]

    def summary_of(commands: list[dict[str, object]]) -> dict[str, object]:
        return summarize(
            _timeline(commands=commands),
            started_at_s=T0,
            day_end_s=T0 + 4,
            ended_at_s=T0 + 6,
            peak_at_s=T0 + 2,
            speed=60.0,
            slo_lag_s=2.0,
            records=RecordCounts(produced=1, trained_unique=1, trained_total=1),
        )

    summary = summary_of(day + drain)
    # every command is listed; the drain's are marked and left out of the share
    assert [a["after_day"] for a in summary["actions"]] == [False] * 3 + [True] * 2
    assert summary["fallback_share"] == pytest.approx(1 / 3, abs=1e-4)
    text = format_summary(summary | {"engine": {"kind": "none"}, "auc_lost_to_lag": None})
    assert "(fallbacks 33 % of the day's; 2 while draining)" in text
    assert summary_of(drain)["fallback_share"] is None


def test_workers_at_reads_a_step_function():
    changes = [(10.0, 2), (20.0, 5)]
    assert [workers_at(changes, t) for t in (5, 10, 15, 20, 99)] == [0, 2, 2, 5, 5]


def test_roc_auc_matches_the_definition_with_ties():
    assert roc_auc(np.array([0.1, 0.4, 0.35, 0.8]), np.array([0, 0, 1, 1])) == 0.75
    assert roc_auc(np.array([0.5, 0.5]), np.array([0, 1])) == 0.5
    assert np.isnan(roc_auc(np.array([0.1, 0.2]), np.array([1, 1])))
    rng = np.random.default_rng(0)
    labels = rng.random(2000) < 0.3
    scores = labels + rng.normal(0, 1, 2000)
    pairs = (scores[labels][:, None] > scores[~labels][None, :]).mean()
    assert roc_auc(scores, labels) == pytest.approx(pairs, abs=1e-9)


def test_trained_ids_tail_files_and_find_what_is_missing(tmp_path):
    ids = TrainedIds(tmp_path)
    (tmp_path / "w0.ids").write_bytes(np.array([0, 1, 2, 5], dtype="<i8").tobytes())
    with (tmp_path / "w1.ids").open("wb") as f:
        f.write(np.array([2, 3], dtype="<i8").tobytes() + b"\x07\x00")  # a half-written id
    ids.refresh()
    assert (ids.unique, ids.total, ids.duplicates) == (5, 6, 1)
    assert ids.covered(6) == 5 and ids.missing(8) == [4, 6, 7]
    with (tmp_path / "w1.ids").open("ab") as f:
        f.write(b"\x00" * 6 + np.array([4], dtype="<i8").tobytes())  # the rest of id 7, then 4
    ids.refresh()
    assert ids.covered(8) == 7 and ids.missing(8) == [6]
    assert ids.forwarded == 0
    (tmp_path / "w1.forwarded.ids").write_bytes(np.array([6, 1], dtype="<i8").tobytes())
    ids.refresh()
    assert ids.forwarded == 2 and ids.missing(8) == [] and ids.duplicates == 2


def test_stats_tail_returns_complete_lines_once(tmp_path):
    tail = StatsTail(tmp_path)
    path = tmp_path / "w0.jsonl"
    path.write_text(json.dumps({"auc": 0.7, "at_s": 1}) + "\n" + '{"auc": 0.')
    assert tail.read_new() == [{"auc": 0.7, "at_s": 1}]
    with path.open("a") as f:
        f.write('8, "at_s": 2}\nnot json\n')
    assert tail.read_new() == [{"auc": 0.8, "at_s": 2}]
    assert tail.read_new() == []


def test_timeline_averages_fresh_evaluations_and_keeps_forecasts():
    timeline = Timeline(partitions=2)
    timeline.add_evaluations([{"at_s": 10.0, "worker_id": "a", "auc": 0.6}])
    timeline.add_evaluations(
        [
            {"at_s": 11.0, "worker_id": "b", "auc": 0.8},
            {"at_s": 11.0, "worker_id": "c", "auc": None},
        ]
    )
    timeline.add_evaluations([{"at_s": 20.0, "worker_id": "b", "auc": 0.9}])  # a is stale
    assert timeline.auc == [(10.0, 0.6), (11.0, pytest.approx(0.7)), (20.0, 0.9)]
    timeline.set_forecast({"first_step_at_ms": 1000, "step_s": 2.0, "records_per_s": [1, 2]})
    timeline.set_forecast({"first_step_at_ms": 3000, "step_s": 2.0, "records_per_s": [5]})
    assert timeline.to_json()["forecast"] == [[1.0, 1.0], [3.0, 5.0]]
    assert timeline.to_json()["band"] == []
    timeline.set_forecast(
        {
            "first_step_at_ms": 5000,
            "step_s": 2.0,
            "records_per_s": [4, 6],
            "low_records_per_s": [3, 4],
            "high_records_per_s": [5, 9],
            "model": "fedformer",
            "live": "seasonal_naive",
            "recent_mase": None,
        }
    )
    assert timeline.to_json()["band"] == [[5.0, 3.0, 5.0], [7.0, 4.0, 9.0]]
    assert timeline.to_json()["forecaster"]["live"] == "seasonal_naive"
    timeline.add_workers(1.0, 2)
    timeline.add_workers(2.0, 2)
    timeline.add_workers(3.0, 3)
    assert timeline.workers == [(1.0, 2), (3.0, 3)]


def test_timeline_records_what_the_executor_did():
    timeline = Timeline(partitions=2)
    result = ApplyResult(
        command_id="c1",
        outcome=Outcome.APPLIED,
        attempts=1,
        workers_before=2,
        workers_after=3,
        error=None,
        duration_s=0.1,
    )
    timeline.add_action(5.0, result)
    assert timeline.to_json()["actions"] == [
        {
            "at_s": 5.0,
            "command_id": "c1",
            "outcome": "applied",
            "workers_before": 2,
            "workers_after": 3,
            "error": None,
            "assignment": None,
            "prep_s": None,
            "duration_s": 0.1,
        }
    ]


def test_each_applied_action_lists_its_mode_preparation_pause_and_rates():
    # 100 records/s produced; training stops for 2 s after the action at T0 + 10
    progress = []
    trained = 0.0
    for k in range(300):
        t = T0 + k * 0.1
        if not T0 + 10 <= t < T0 + 12:
            trained = min(trained + 10 + (200 if abs(t - (T0 + 12)) < 1e-6 else 0), k * 10)
        progress.append([t, k * 10, trained])
    timeline = _timeline(
        progress=progress,
        actions=[
            {
                "command_id": "c1",
                "outcome": "applied",
                "at_s": T0 + 10,
                "assignment": "group",
                "prep_s": 2.5,
            }
        ],
        commands=[
            {
                "command_id": "c1",
                "at_s": T0 + 9.5,
                "current_workers": 2,
                "target_workers": 4,
                "reason": "FALLBACK",
                "explanation": "lag",
            }
        ],
    )
    summary = summarize(
        timeline,
        started_at_s=T0,
        day_end_s=T0 + 30,
        ended_at_s=T0 + 30,
        peak_at_s=T0 + 2,
        speed=144.0,
        slo_lag_s=2.0,
        records=RecordCounts(produced=3000, trained_unique=3000, trained_total=3000),
        assumed_costs=ActionCostEstimate(
            prep_s=10.0, prep_spread_s=3.0, pause_s=0.5, pause_spread_s=0.25
        ),
    )
    [action] = summary["actions"]
    assert action["mode"] == "group" and action["prep_s"] == 2.5
    assert action["pause_s"] == pytest.approx(2.0, abs=0.2)
    assert action["pause_simulated_s"] == pytest.approx(action["pause_s"] * 144, abs=0.5)
    assert action["records_per_s_before"] == pytest.approx(100, rel=0.1)
    assert summary["action_pauses_s"] == [action["pause_s"]]
    # what the planner assumed beside what the run measured: the 2-s pause shows a gap
    costs = summary["action_costs"]
    assert costs["assumed"]["prep_s"] == 10.0 and costs["assumed"]["pause_s"] == 0.5
    assert costs["measured"]["prep_s"] == [2.5, 2.5]
    assert costs["measured"]["pause_s"] == [action["pause_s"], action["pause_s"]]
    assert "assumed prep 10.00 s, pause 0.50 s; measured prep 2.50-2.50 s" in (
        format_summary(summary | {"engine": {"kind": "none"}, "auc_lost_to_lag": None})
    )


def test_planner_forecast_is_none_until_the_control_app_answers():
    assert planner_forecast(free_port()) is None


def test_demo_settings_are_checked():
    assert DemoSettings().day_s == 600 and DemoSettings().slo_s == pytest.approx(1200 / 144)
    with pytest.raises(ConfigError, match="too short"):
        DemoSettings(speed=86_400 / 10)
    with pytest.raises(ConfigError, match="initial-workers"):
        DemoSettings(initial_workers=9, max_workers=8)
    config = DemoWorkerConfig(run_dir=Path("/x"), start_at_s=T0, duration_s=100.0, drift_turns=0.5)
    assert DemoWorkerConfig.from_env(config.to_env()) == config
    assert config.phase(T0 - 5) == 0.0 and config.phase(T0 + 50) == 0.25
    assert config.phase(T0 + 500) == 0.5
    with pytest.raises(ConfigError, match="STREAMTRAIN_DEMO_RUN_DIR"):
        DemoWorkerConfig.from_env({})


def test_the_engine_summary_reads_the_one_models_steps_and_quorum():
    steps = [[T0 + k, 10 * k, 2 if k < 5 else 4] for k in range(21)]  # 10 steps/s
    live = engine_summary("torchft", steps)
    assert live["kind"] == "torchft" and live["one_model"]
    assert live["committed_steps"] == 200 and live["steps_per_s"] == pytest.approx(10.0)
    assert live["quorum"] == {"now": 4, "min": 2, "max": 4}
    run = engine_summary("torchft", steps, started_at_s=T0 + 5, ended_at_s=T0 + 10)
    assert run["committed_steps"] == 100 and run["quorum"]["min"] == 4
    assert engine_summary("none", steps) == {"kind": "none", "one_model": False}
    assert engine_summary("torchft", []) == {"kind": "torchft", "one_model": True}
    timeline = Timeline(partitions=1)
    timeline.add_evaluations([{"at_s": T0, "worker_id": "w-0", "auc": 0.7, "step": 3, "quorum": 2}])
    timeline.add_evaluations([{"at_s": T0 + 1, "worker_id": "w-0", "auc": 0.7}])  # engine none
    assert timeline.to_json()["steps"] == [[T0, 3, 2]]


def test_the_demo_runs_torchft_or_none_and_refuses_torchelastic_with_its_reason():
    assert DemoSettings().engine == "torchft"
    assert DemoSettings(engine="none", assignment="group").engine == "none"
    with pytest.raises(ConfigError, match="restarts every worker"):
        DemoSettings(engine="torchelastic")
    with pytest.raises(ConfigError, match="--assignment shards"):
        DemoSettings(assignment="group")  # one model: the shuffle would train a copy
    with pytest.raises(ConfigError, match="torchft or none"):
        DemoSettings(engine="horovod")
