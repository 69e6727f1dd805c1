"""The numbers of a small `streamtrain simulate`, pinned: the simulator's speed-ups (the
engine's drained-queue fast path, variants split over processes, forecasts computed
while the baselines are tuned) must not change a single one of them.

``data/simulate_pinned.json`` is the command's ``--json`` output as the straightforward
engine printed it; regenerate it only for a change that is meant to move the numbers,
and say in the change why the new ones are right. Floats are compared to 1e-9 relative:
numpy's vectorized sums round differently on CPUs with different SIMD widths (the last
digit or two moved between two machines), and anything the simulator changes on purpose
moves them far more.
"""

import json
import math
from pathlib import Path
from typing import Any

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
    assert _differences(json.loads(result.stdout), json.loads(PINNED.read_text())) == []


def _differences(got: Any, pinned: Any, where: str = "") -> list[str]:
    """The paths where ``got`` differs from ``pinned`` (floats: beyond 1e-9 relative)."""
    if isinstance(got, dict) and isinstance(pinned, dict):
        if got.keys() != pinned.keys():
            return [f"{where}: keys {sorted(got)} != {sorted(pinned)}"]
        return [d for key in got for d in _differences(got[key], pinned[key], f"{where}/{key}")]
    if isinstance(got, list) and isinstance(pinned, list):
        if len(got) != len(pinned):
            return [f"{where}: {len(got)} items != {len(pinned)}"]
        return [
            d
            for i, pair in enumerate(zip(got, pinned, strict=True))
            for d in _differences(*pair, f"{where}[{i}]")
        ]
    if isinstance(got, float) and isinstance(pinned, float):
        return [] if math.isclose(got, pinned, rel_tol=1e-9) else [f"{where}: {got} != {pinned}"]
    return (
        [] if got == pinned and type(got) is type(pinned) else [f"{where}: {got!r} != {pinned!r}"]
    )
