"""The control app's command line, pinned: the demo's argv as it was before the builder
existed, for the default settings and for settings that move every computed value."""

import sys
from pathlib import Path

import pytest

from streamtrain.demo.children import DemoNames
from streamtrain.demo.control_args import PLAN_STEP_S, control_app_argv
from streamtrain.demo.settings import DemoSettings
from streamtrain.scale.action_costs import measured_cost

NAMES = DemoNames.for_run("abcd1234")
RUN = Path("/tmp/run")
SHARDS = measured_cost("shards", "torchft")  # the demo's default --assignment and --engine


def model_s(wall_s: float, speed: float) -> str:
    return f"{wall_s * speed:.0f}"


# `streamtrain demo`'s control app for DemoSettings() before control_args.py existed.
DEFAULT_ARGV = [
    *("lag", "run", "--group", "streamtrain-demo-abcd1234"),
    *("--topic", "streamtrain.demo.abcd1234.ctr", "--tick-s", "1"),
    *("--app-id", "streamtrain.demo.abcd1234.control"),
    *("--reports-topic", "streamtrain.demo.abcd1234.reports"),
    *("--alerts-topic", "streamtrain.demo.abcd1234.alerts"),
    *("--web-port", "45678", "--slo-violation-s", "8.333", "--slo-warning-s", "4.167"),
    *("--history-step-s", "5", "--cps-window-s", "6.250"),
    *("--data-dir", "/tmp/run/control-data", "--plan-job", "streamtrain-demo-abcd1234"),
    *("--policy", "streamtrain", "--samples-topic", "streamtrain.demo.abcd1234.throughput"),
    *("--commands-topic", "streamtrain.demo.abcd1234.commands"),
    *("--min-workers", "2", "--max-workers", "8", "--initial-workers", "4"),
    *("--plan-step-s", "300", "--plan-assignment", "shards", "--plan-engine", "torchft"),
    *("--plan-quantile", "0.8"),
    *("--action-pause-s", model_s(SHARDS.pause_s, 144)),
    *("--scale-up-prep-s", model_s(SHARDS.prep_s, 144)),  # torchft's measured joiner
    *("--min-action-pause-s", model_s(SHARDS.pause_s, 144)),
    *("--plan-lag-floor-s", "288"),  # shards: 2 wall s more than group mode
    *("--prior-rate", "400.000", "--sample-bucket-s", "432"),
    *("--policy-setting", "tolerated_lag_s=432"),
    *("--policy-setting", "headroom=0.35"),
    *("--policy-setting", "down_headroom=0.15"),
    *("--policy-setting", "fallback_target_lag_s=1200"),
    *("--policy-setting", "fallback_cooldown_s=2880"),
    *("--policy-setting", "trigger_lag_enter_s=720"),
    *("--policy-setting", "trigger_lag_exit_s=360"),
    *("--plan-time-scale", "144", "--plan-history", "/tmp/run/seed-history.json"),
    *("--shards-job", "streamtrain-demo-abcd1234", "--shard-max-wait-s", "0.5"),
    *("--shard-lease-s", "6.0"),
]


def _argv(settings: DemoSettings) -> list[str]:
    return control_app_argv(
        settings,
        NAMES,
        web_port=45678,
        data_dir=RUN / "control-data",
        history_path=RUN / "seed-history.json",
    )


def _flags(argv: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for flag, value in zip(argv[5::2], argv[6::2], strict=True):
        out.setdefault(flag, []).append(value)
    return out


def test_default_argv_is_unchanged():
    argv = _argv(DemoSettings())
    assert argv[:3] == [sys.executable, "-m", "streamtrain"]
    assert argv[3:] == DEFAULT_ARGV


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        (
            DemoSettings(
                speed=60.0,
                slo_lag_s=3.0,
                min_workers=2,
                initial_workers=3,
                max_workers=6,
                worker_capacity_records_per_s=250.5,
            ),
            {
                "--slo-violation-s": ["3.000"],
                "--slo-warning-s": ["1.500"],
                "--cps-window-s": ["15.000"],
                "--min-workers": ["2"],
                "--max-workers": ["6"],
                "--initial-workers": ["3"],
                "--action-pause-s": [model_s(SHARDS.pause_s, 60)],
                "--min-action-pause-s": [model_s(SHARDS.pause_s, 60)],
                "--prior-rate": ["250.500"],
                "--sample-bucket-s": ["300"],  # never below one planning step
                "--policy-setting": [
                    "tolerated_lag_s=180",
                    "headroom=0.35",  # a ratio: the same at every speed
                    "down_headroom=0.15",
                    "fallback_target_lag_s=180",
                    "fallback_cooldown_s=1200",
                    "trigger_lag_enter_s=300",  # 5 wall seconds at least
                    "trigger_lag_exit_s=150",
                ],
                "--plan-time-scale": ["60"],
            },
        ),
        (
            DemoSettings(speed=2000.0),
            {
                "--slo-violation-s": ["2.000"],  # the SLO's floor
                "--slo-warning-s": ["1.000"],
                "--cps-window-s": ["3.000"],  # at least three ticks
                "--action-pause-s": [model_s(SHARDS.pause_s, 2000)],
                "--sample-bucket-s": ["6000"],
                "--policy-setting": [
                    "tolerated_lag_s=6000",
                    "headroom=0.35",  # a ratio: the same at every speed
                    "down_headroom=0.15",
                    "fallback_target_lag_s=4000",
                    "fallback_cooldown_s=40000",
                    "trigger_lag_enter_s=10000",
                    "trigger_lag_exit_s=5000",
                ],
                "--plan-time-scale": ["2000"],
            },
        ),
    ],
)
def test_wall_durations_become_model_seconds(settings, expected):
    flags = _flags(_argv(settings))
    for flag, values in expected.items():
        assert flags[flag] == values, flag
    assert flags["--plan-step-s"] == [str(PLAN_STEP_S)]


def test_each_engine_plans_with_its_own_measured_costs():
    none = _flags(_argv(DemoSettings(engine="none")))
    one_model = _flags(_argv(DemoSettings()))
    assert none["--plan-engine"] == ["none"] and one_model["--plan-engine"] == ["torchft"]
    copies = measured_cost("shards")
    assert none["--action-pause-s"] == [model_s(copies.pause_s, 144)]
    assert none["--scale-up-prep-s"] == ["864"]  # the demo worker's measured 6 s
    assert one_model["--action-pause-s"] == [model_s(SHARDS.pause_s, 144)]
    assert copies != SHARDS
