"""The fault-injection soak, short: ``python -m benchmarks.chaos --once``.

Every fault kind once in a run of more than 2 minutes (kill -9 of a sending and of a
receiving worker, kill -9 and restart of the durable broker, kill -9 and restart of the
control app, 30 s of one shuffle peer's traffic dropped), on the real path: the durable
embedded broker, `streamtrain worker --shuffle advanced` processes, `streamtrain lag
run`. Every delivered record id must be trained (the benchmark exits 1 otherwise). The
10-minute run is recorded in docs/benchmarks.md.
"""

import subprocess
import sys
from pathlib import Path

from benchmarks.chaos_faults import KINDS

REPO = Path(__file__).resolve().parents[2]


def test_every_fault_once_loses_no_record(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.chaos", "--duration-s", "130", "--once"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr[-3000:]
    result = dict(pair.split("=", 1) for pair in lines[-1].split())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert result["lost"] == "0"
    assert int(result["produced"]) > 0
    assert int(result["faults"]) == len(KINDS)
    assert set(result["fault_kinds"].split(",")) == set(KINDS)
    assert float(result["max_stall_s"]) >= 0.0 and float(result["duplicates_pct"]) >= 0.0
    # the hot worker cannot keep up alone: the shuffle carried records (counted from what
    # the receivers trained, killed incarnations included)
    assert int(result["forwarded"]) > 0
