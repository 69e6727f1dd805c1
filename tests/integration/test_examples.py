"""The examples under examples/ run as their docstrings say."""

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_ddp_loop_example_trains_one_model_on_two_workers():
    result = subprocess.run(
        [sys.executable, "examples/ddp_loop.py"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summaries = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert len(summaries) == 2
    assert sum(s["records_trained"] for s in summaries) >= 2_000
    assert {s["engine"]["kind"] for s in summaries} == {"torchft"}
    assert all(s["engine"]["committed_step"] > 0 for s in summaries)
