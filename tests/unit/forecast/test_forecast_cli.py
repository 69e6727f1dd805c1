import csv
import io
import json

import click
from click.testing import CliRunner

from streamtrain.commands.forecast import forecast, trace


def _synth(*args):
    result = CliRunner().invoke(trace, ["synth", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_trace_synth_writes_csv_for_each_shape():
    for shape in ("kale", "web", "retail", "callcentre", "bikeshare"):
        rows = list(csv.DictReader(io.StringIO(_synth("--days", "1", "--shape", shape))))
        assert rows and set(rows[0]) == {"timestamp", "records_per_s"}
        assert len(rows) <= 1440
    assert _synth("--days", "1", "--seed", "4") == _synth("--days", "1", "--seed", "4")
    assert _synth("--days", "1", "--seed", "4") != _synth("--days", "1", "--seed", "5")


def test_trace_synth_defaults_to_28_days_of_kale(monkeypatch):
    monkeypatch.setenv("STREAMTRAIN_TRACE_DAYS", "2")
    out = _synth()
    assert len(out.splitlines()) == 1 + 2 * 1440


def test_eval_json_with_the_naive_models(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(_synth("--days", "9", "--shape", "retail"))
    result = CliRunner().invoke(
        forecast,
        [
            "eval",
            "--trace",
            str(path),
            "--models",
            "seasonal_naive_daily,seasonal_naive_weekly",
            "--test-days",
            "1",
            "--horizon-min",
            "60",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout.strip().splitlines()[-1])
    assert list(payload["models"]) == ["seasonal_naive_daily", "seasonal_naive_weekly"]
    for scores in payload["models"].values():
        assert set(scores) == {
            "mase",
            "mae",
            "rmse",
            "smape_pct",
            "mape_pct",
            "fit_s",
            "predict_ms",
            "mase_by_step",
        }
        assert scores["mase"] > 0 and len(scores["mase_by_step"]) == 60
    # The header goes to stderr, no progress with --json; stdout is the JSON alone.
    assert "testing on the last 1 days" in result.stderr
    assert "fitted" not in result.stderr and "[fits" not in result.stderr


def test_eval_table_and_errors(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(_synth("--days", "3"))
    ok = CliRunner().invoke(
        forecast,
        ["eval", "--trace", str(path), "--models", "ets", "--test-days", "0.5"],
    )
    assert ok.exit_code == 0, ok.output
    lines = ok.stdout.splitlines()
    assert lines[0].split()[:2] == ["model", "MASE"]
    assert lines[1].split()[0] == "ets"
    # progress without --json: every fit counted out of all, the last without an estimate
    assert "[fits 1/1] ets: fitted on" in ok.stderr and "left" not in ok.stderr
    bad = CliRunner().invoke(forecast, ["eval", "--trace", str(path), "--models", "nope"])
    assert bad.exit_code == 2 and "unknown model(s) nope" in bad.stderr
    missing = CliRunner().invoke(forecast, ["eval", "--trace", str(tmp_path / "absent.csv")])
    assert missing.exit_code == 1 and "cannot read trace" in missing.stderr
    odd = CliRunner().invoke(
        forecast, ["eval", "--trace", str(path), "--horizon-min", "1.5", "--models", "ets"]
    )
    assert odd.exit_code == 2 and "whole number" in odd.stderr


def test_every_option_has_an_env_var():
    for group in (forecast, trace):
        for command in group.commands.values():
            for param in command.params:
                if isinstance(param, click.Option) and not param.hidden:
                    assert isinstance(param.envvar, str), param.name
                    assert param.envvar.startswith("STREAMTRAIN_"), param.name


def test_eval_reads_the_trace_at_its_own_step_and_plots(tmp_path):
    path = tmp_path / "hourly.csv"
    path.write_text(_synth("--days", "10", "--shape", "web", "--step-s", "3600"))
    plot = tmp_path / "eval.png"
    result = CliRunner().invoke(
        forecast,
        [
            "eval",
            "--trace",
            str(path),
            "--models",
            "seasonal_naive,mstl",
            "--test-days",
            "2",
            "--plot",
            str(plot),
        ],
    )
    assert result.exit_code == 0, result.output
    # an hourly trace is read hourly; the default horizon is two steps
    assert "steps of 3600 s" in result.stderr and "horizon 120 min" in result.stderr
    assert "[2/2] mstl" in result.stderr
    assert plot.stat().st_size > 10_000
    assert "MASE by horizon step" in result.stdout
    by_step = result.stdout.split("MASE by horizon step")[1].splitlines()
    assert by_step[1].split() == ["model", "1", "2"]
    assert by_step[3].split()[0] == "mstl"


def test_the_progress_meter_counts_fits_and_estimates_the_time_left():
    import io

    from streamtrain.commands.progress import Meter, duration_text

    now = [0.0]
    out = io.StringIO()
    meter = Meter(4, "fits", stream=out, clock=lambda: now[0])
    assert meter.left_s() is None
    now[0] = 30.0
    meter.done("a")
    assert meter.left_s() == 90.0  # 30 s per fit so far, three to go
    now[0] = 40.0
    meter.done("b")
    assert meter.left_s() == 40.0
    assert out.getvalue().splitlines() == [
        "[fits 1/4] a; about 2 min left",
        "[fits 2/4] b; about 40 s left",
    ]
    quiet = io.StringIO()
    silent = Meter(2, "fits", quiet=True, stream=quiet)
    silent.done("a")
    silent.note("a header")
    assert quiet.getvalue() == "a header\n"
    assert [duration_text(s) for s in (5, 600, 3900)] == ["5 s", "10 min", "1 h 5 min"]


def test_planned_fits_is_what_the_harness_makes():
    import numpy as np

    from streamtrain.forecast.evaluate import EvalSettings, planned_fits, rolling_origin
    from streamtrain.forecast.registry import make_forecaster

    values = 10 + np.sin(np.arange(24 * 48) * 2 * np.pi / 48)
    for refit in (0, 48, 100):
        settings = EvalSettings(
            horizon_steps=2,
            test_steps=5 * 48 + 7,
            stride_steps=3,
            season_steps=48,
            refit_every_steps=refit,
        )
        scores = rolling_origin(
            values, lambda: make_forecaster("seasonal_naive_daily", step_s=1800), settings
        )
        assert planned_fits(values.shape[0], settings) == scores.fits
