"""`streamtrain simulate`: options backed by env vars, JSON output with intervals and the
tuned settings, the per-mode costs, the paper's table, clear errors."""

import importlib
import json

import click
import pytest
from click.testing import CliRunner

from streamtrain.commands.simulate import simulate
from streamtrain.config import AssignmentMode
from streamtrain.forecast.trace import synth_trace, write_trace
from streamtrain.scale.action_costs import MEASURED_COSTS
from streamtrain.sim.tuning import GRIDS, TuningRule, tune


@pytest.fixture(scope="module")
def trace_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("sim") / "trace.csv"
    with path.open("w") as handle:
        write_trace(synth_trace(2, seed=2), handle)
    return path


QUICK = ("--seeds", "1", "--jobs", "1", "--no-tune", "--forecaster", "seasonal_naive")


def _run(*args, quick=True, **kwargs):
    return CliRunner().invoke(simulate, [*(QUICK if quick else ()), *args], **kwargs)


def test_every_option_has_an_env_var():
    for param in simulate.params:
        if isinstance(param, click.Option) and param.name != "help":
            assert isinstance(param.envvar, str), param.name
            assert param.envvar.startswith("STREAMTRAIN_"), param.name
    result = _run("--help", terminal_width=200)
    assert result.exit_code == 0
    assert "STREAMTRAIN_SIMULATE_PEAK_WORKERS" in result.output


def test_json_table_for_a_trace(trace_csv):
    result = _run(
        "--trace", str(trace_csv), "--policies", "adequate,hpa", "--partitions", "8", "--json"
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["seeds"] == 1 and payload["tuned"] is False
    assert list(payload["policies"]) == ["adequate", "hpa"]
    assert payload["ci95"]["hpa"]["worker_hours"] is None  # one seed, no interval
    assert payload["policies"]["adequate"]["worker_hours"] == pytest.approx(28 * 24)
    assert "simulating 2 variant(s) x 1 seed(s) over 1 day(s)" in result.stderr


def test_text_table_and_env_vars(trace_csv):
    env = {
        "STREAMTRAIN_SIMULATE_TRACE": str(trace_csv),
        "STREAMTRAIN_SIMULATE_POLICIES": "hpa",
        "STREAMTRAIN_SIMULATE_PARTITIONS": "8",
        "STREAMTRAIN_SIMULATE_PEAK_WORKERS": "12",
        "STREAMTRAIN_SIMULATE_SEEDS": "1",
        "STREAMTRAIN_SIMULATE_TUNE": "false",
        "STREAMTRAIN_SIMULATE_FORECASTER": "seasonal_naive",
    }
    result = _run(env=env, quick=False)
    assert result.exit_code == 0, result.output
    header, row = result.stdout.splitlines()
    assert header.split()[:3] == ["policy", "violation", "%"]
    assert row.startswith("hpa")


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--policies", "hpa,oracle"], "unknown oracle"),
        (["--policies", "hpa,hpa"], "twice"),
        (["--forecaster", "crystal_ball"], "crystal_ball"),
    ],
)
def test_usage_errors_exit_2(trace_csv, args, needle):
    result = _run("--trace", str(trace_csv), "--partitions", "8", *args)
    assert result.exit_code == 2
    assert needle in result.stderr


def test_missing_trace_file_is_an_error(tmp_path):
    result = _run("--trace", str(tmp_path / "missing.csv"))
    assert result.exit_code == 1
    assert "missing.csv" in result.stderr


def test_plot_without_matplotlib_says_how_to_get_it(trace_csv, tmp_path, monkeypatch):
    real = importlib.import_module

    def no_matplotlib(name, *args):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", no_matplotlib)
    result = _run(
        "--trace",
        str(trace_csv),
        "--policies",
        "hpa",
        "--partitions",
        "8",
        "--plot",
        str(tmp_path / "out.png"),
    )
    assert result.exit_code == 2
    assert "pip install matplotlib" in result.stderr


def test_plot_writes_the_image(trace_csv, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "out.png"
    result = _run(
        "--trace",
        str(trace_csv),
        "--policies",
        "adequate,hpa",
        "--partitions",
        "8",
        "--plot",
        str(out),
    )
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("days", [1, 2])
def test_without_a_trace_the_last_days_of_a_synthetic_week_are_simulated(days):
    result = _run(
        "--policies", "adequate", "--partitions", "4", "--simulate-days", str(days), "--json"
    )
    assert result.exit_code == 0, result.output
    assert f"synth-{days + 6}d-seed0" in result.stderr  # --no-tune: a week of history
    hours = json.loads(result.stdout)["policies"]["adequate"]["worker_hours"]
    assert hours == pytest.approx(28 * 24 * days)


def _hpa(*args, trace_csv):
    result = _run(
        "--trace", str(trace_csv), "--policies", "hpa", "--partitions", "8", "--json", *args
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["policies"]["hpa"]


def test_the_per_mode_costs_reach_the_simulation(trace_csv):
    base = _hpa(trace_csv=trace_csv)
    group_pause_s = MEASURED_COSTS[AssignmentMode.GROUP].pause_s  # the live measurement
    per_action_min = base["downtime_min"] / base["scaling_actions"]
    assert per_action_min == pytest.approx(group_pause_s / 60, abs=0.01)
    longer = _hpa("--two-phase-checkpoint-s", "30", "--group-pause-s", "30", trace_csv=trace_csv)
    assert longer["downtime_min"] / longer["scaling_actions"] == pytest.approx(1.0, abs=0.05)
    shards = _hpa("--assignment", "shards", "--shards-pause-s", "0", trace_csv=trace_csv)
    assert shards["downtime_min"] == 0
    restart = _hpa("--restart", "pause", "--group-prep-s", "100", trace_csv=trace_csv)
    assert restart["downtime_min"] / restart["scaling_actions"] == pytest.approx(
        (60 + 100 + group_pause_s) / 60, abs=0.03
    )


def test_tuning_prints_the_chosen_settings_and_uses_them(tmp_path, monkeypatch):
    # The CLI's wiring is what is tested here (the grid search itself in test_tuning.py):
    # one tuning seed instead of three, through the real search.
    import streamtrain.commands.simulate as command

    calls = []

    def one_seed(window, settings, **kwargs):
        calls.append(settings.policies)
        return tune(window, settings, rule=TuningRule(seeds=1), **kwargs)

    monkeypatch.setattr(command, "tune_baselines", one_seed)
    path = tmp_path / "three.csv"
    with path.open("w") as handle:
        write_trace(synth_trace(3, seed=2), handle)
    result = CliRunner().invoke(
        simulate,
        [
            "--trace",
            str(path),
            "--policies",
            "hpa,kale",
            "--partitions",
            "8",
            "--seeds",
            "1",
            "--jobs",
            "1",
            "--forecaster",
            "seasonal_naive",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["tuned"] is True
    assert "tuned hpa: {'target'" in result.stderr
    assert set(payload["policy_settings"]["hpa"]) == {"target", "scale_down_window_s"}
    assert payload["policy_settings"]["kale"] == {}
    assert "kale_vs_hpa_lag_pct" in payload["ratios"]
    assert calls == [("hpa", "kale")]
    assert payload["policy_settings"]["hpa"] in [dict(p) for p in GRIDS["hpa"]]


def test_a_trace_too_short_to_tune_runs_untuned(trace_csv):
    result = _run(
        "--trace", str(trace_csv), "--policies", "hpa", "--partitions", "8", "--tune", "--json"
    )
    assert result.exit_code == 0, result.output
    assert "too short to tune" in result.stderr
    assert json.loads(result.stdout)["tuned"] is False


def test_the_paper_table(trace_csv):
    result = _run(
        "--trace", str(trace_csv), "--policies", "hpa,streamtrain", "--partitions", "8", "--paper"
    )
    assert result.exit_code == 0, result.output
    header, _rule, hpa, ours = result.stdout.strip().splitlines()
    assert "violation % ours" in header and "paper" in header
    assert "19.57 ± 1.50" in hpa
    assert ours.startswith("| streamtrain")


def test_the_engine_brings_its_measured_pause(trace_csv):
    from streamtrain.scale.action_costs import ENGINE_COSTS

    for engine in ("torchft", "torchelastic"):
        run = _hpa("--assignment", "shards", "--engine", engine, trace_csv=trace_csv)
        per_action_min = run["downtime_min"] / run["scaling_actions"]
        assert per_action_min == pytest.approx(ENGINE_COSTS[engine].pause_s / 60, rel=0.6)
    given = _hpa(
        "--assignment", "shards", "--engine", "torchelastic", "--shards-pause-s", "0",
        trace_csv=trace_csv,
    )  # fmt: skip
    assert given["downtime_min"] == 0
