"""`streamtrain scale plan|stabilize|fit`: the issue's contracts, and clear bad-input errors."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from streamtrain.cli import main
from streamtrain.scale.physics import EXAMPLE_SYNC_JOB

KALE_THETA = "0.00035,2.5726,0.9824,0.02786"


def _run(*args):
    return CliRunner().invoke(main, ["scale", *args])


def test_plan_prints_ten_for_the_kale_example():
    result = _run(
        "plan", "--model", "sync", "--theta", KALE_THETA, "--batch-size", "16384", "--load", "30000"
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == "10\n"


def test_plan_over_a_series_and_cannot_keep_up_warning():
    result = _run(
        "plan",
        "--model",
        "sync",
        "--theta",
        KALE_THETA,
        "--batch-size",
        "16384",
        "--load",
        "20000,30000,90000",
    )
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0].split(",")[:2] == ["4", "10"]
    assert "keeps up" in result.stderr


def test_stabilize_prints_the_kale_example():
    result = _run(
        "stabilize", "--plan", "4,4,5,6,6,6", "--step-min", "10", "--tau-min", "15", "--rho", "1"
    )
    assert result.exit_code == 0
    assert result.stdout == "4,4,6,6,6,6\n"


@pytest.fixture
def observations(tmp_path):
    physics = EXAMPLE_SYNC_JOB
    w = np.arange(1, 25, dtype=float)
    f = physics.sync_samples_per_s(16384, w, w / 2)
    path = tmp_path / "obs.csv"
    rows = "".join(f"{a:g},{b:.3f}\n" for a, b in zip(w, f, strict=True))
    path.write_text("workers,samples_per_s\n" + rows)
    return path


def test_fit_json_has_the_contract_keys(observations):
    result = _run(
        "fit", "--data", str(observations), "--model", "sync", "--batch-size", "16384", "--json"
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert set(payload) == {"model", "theta", "mae", "rmse", "mape_pct"}
    assert payload["model"] == "sync"
    assert len(payload["theta"]) == 4
    assert payload["mape_pct"] < 1.0  # noise-free Eq. 4 data with a constant w/p ratio


def test_fit_human_output(observations):
    result = _run("fit", "--data", str(observations), "--model", "ernest")
    assert result.exit_code == 0
    assert "MAPE" in result.stdout


@pytest.mark.parametrize(
    "args,needle",
    [
        (["plan", "--model", "sync", "--theta", "1,x,3,4", "--load", "5"], "--theta"),
        (["plan", "--model", "sync", "--theta", "1,2,3", "--load", "5"], "4 coefficients"),
        (["plan", "--model", "sync", "--theta", KALE_THETA, "--load", "-5"], "non-negative"),
        (["stabilize", "--plan", "4,4.5"], "whole worker counts"),
        (["fit", "--data", "/nonexistent.csv", "--model", "sync"], "cannot read"),
    ],
)
def test_bad_input_is_a_clear_error(args, needle):
    result = _run(*args)
    assert result.exit_code == 2
    assert needle in result.output
    assert "Traceback" not in result.output


def test_fit_rejects_empty_and_malformed_files(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("workers,samples_per_s\n")
    assert "no data rows" in _run("fit", "--data", str(empty), "--model", "sync").output
    bad = tmp_path / "bad.csv"
    bad.write_text("workers,samples_per_s\n1,abc\n")
    assert "line 2" in _run("fit", "--data", str(bad), "--model", "sync").output
    cols = tmp_path / "cols.csv"
    cols.write_text("w,rate\n1,2\n")
    assert "lacks column" in _run("fit", "--data", str(cols), "--model", "sync").output
