"""`streamtrain simulate`: options backed by env vars, JSON output, clear errors."""

import importlib
import json

import click
import pytest
from click.testing import CliRunner

from streamtrain.commands.simulate import simulate
from streamtrain.forecast.trace import synth_trace, write_trace


@pytest.fixture(scope="module")
def trace_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("sim") / "trace.csv"
    with path.open("w") as handle:
        write_trace(synth_trace(2, seed=2), handle)
    return path


def _run(*args, **kwargs):
    return CliRunner().invoke(simulate, list(args), **kwargs)


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
    assert list(payload) == ["policies"]
    assert list(payload["policies"]) == ["adequate", "hpa"]
    assert payload["policies"]["adequate"]["worker_hours"] == pytest.approx(28 * 24)
    assert "simulating hpa" in result.stderr


def test_text_table_and_env_vars(trace_csv):
    env = {
        "STREAMTRAIN_SIMULATE_TRACE": str(trace_csv),
        "STREAMTRAIN_SIMULATE_POLICIES": "hpa",
        "STREAMTRAIN_SIMULATE_PARTITIONS": "8",
        "STREAMTRAIN_SIMULATE_PEAK_WORKERS": "12",
    }
    result = _run(env=env)
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
    assert f"synth-{days + 6}d-seed0" in result.stderr
    hours = json.loads(result.stdout)["policies"]["adequate"]["worker_hours"]
    assert hours == pytest.approx(28 * 24 * days)
