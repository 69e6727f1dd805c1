"""The numbers of a small `streamtrain simulate`, pinned: the simulator's speed-ups (the
engine's drained-queue fast path, variants split over processes, forecasts computed
while the baselines are tuned) must not change a single one of them.

``data/simulate_pinned.json`` is the command's ``--json`` output as the straightforward
engine printed it; regenerate it only for a change that is meant to move the numbers,
and say in the change why the new ones are right.
"""

import json
from pathlib import Path

from click.testing import CliRunner

from streamtrain.commands.simulate import simulate
from streamtrain.forecast.trace import synth_trace, write_trace

PINNED = Path(__file__).parent / "data" / "simulate_pinned.json"


def test_a_small_comparison_prints_the_pinned_numbers(tmp_path):
    path = tmp_path / "pin.csv"
    with path.open("w") as handle:
        write_trace(synth_trace(2, seed=5), handle)
    args = [
        "--trace", str(path), "--simulate-days", "1", "--seeds", "2", "--jobs", "1",
        "--no-tune", "--policies", "hpa,autopilot,madu,kale,streamtrain",
        "--forecaster", "seasonal_naive", "--shuffle", "policy", "--partitions", "200",
        "--json",
    ]  # fmt: skip
    result = CliRunner().invoke(simulate, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == json.loads(PINNED.read_text())
