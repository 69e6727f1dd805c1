"""Helpers for the data-parallel tests: a lighthouse, scripted ranks
(``tests/integration/elastic_rank.py``) as real processes, and their logs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from streamtrain.elastic.lighthouse import LighthouseProcess, LighthouseSettings
from streamtrain.elastic.statecodec import decode

REPO = Path(__file__).resolve().parents[2]
DEADLINE_S = 120.0


def start_lighthouse(tmp_path: Path, port: int = 0, **settings: Any) -> LighthouseProcess:
    lighthouse = LighthouseProcess(
        LighthouseSettings(port=port, **settings), log_path=tmp_path / "lighthouse.log"
    )
    lighthouse.start()
    return lighthouse


class Ranks:
    """Scripted ranks of one job, started as processes; every one stopped at the end."""

    def __init__(self, tmp_path: Path, lighthouse: str | None = None) -> None:
        self.dir = tmp_path
        self.lighthouse = lighthouse
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, batches: list[list[int]], **plan: Any) -> None:
        out = self.dir / f"{name}.jsonl"
        full = {
            "engine": "torchft",
            "lighthouse": self.lighthouse,
            "name": name,
            "batches": batches,
            "out": str(out),
            **plan,
        }
        (self.dir / f"{name}.json").write_text(json.dumps(full))
        err = (self.dir / f"{name}.err").open("wb")
        self.processes[name] = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.integration.elastic_rank",
                str(self.dir / f"{name}.json"),
            ],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        err.close()

    def wait(self, name: str, timeout_s: float = DEADLINE_S) -> int:
        try:
            return self.processes[name].wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"rank {name} did not finish within {timeout_s:g} s") from None

    def kill(self, name: str, sig: signal.Signals = signal.SIGKILL) -> None:
        self.processes[name].send_signal(sig)

    def rows(self, name: str) -> list[dict[str, Any]]:
        path = self.dir / f"{name}.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def rounds(self, name: str) -> list[dict[str, Any]]:
        return [r for r in self.rows(name) if "round" in r]

    def acked(self, name: str) -> list[int]:
        return [i for r in self.rows(name) if "acked" in r for i in r["acked"]]

    def state(self, name: str) -> Any:
        return decode((self.dir / f"{name}.jsonl.state").read_bytes())

    def stderr(self, name: str) -> str:
        return (self.dir / f"{name}.err").read_text(errors="replace")

    def wait_for_file(self, path: Path, timeout_s: float = DEADLINE_S) -> None:
        deadline = time.monotonic() + timeout_s
        while not path.exists():
            if time.monotonic() > deadline:
                raise AssertionError(f"{path.name} did not appear within {timeout_s:g} s")
            time.sleep(0.05)

    def wait_rounds(self, name: str, count: int, timeout_s: float = DEADLINE_S) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.rounds(name)) < count:
            if self.processes[name].poll() is not None:
                raise AssertionError(f"rank {name} exited: {self.stderr(name)[-2000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"rank {name} ran fewer than {count} rounds in time")
            time.sleep(0.05)

    def stop_all(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


def batches(first_id: int, size: int, rounds: int) -> list[list[int]]:
    """``rounds`` batches of ``size`` consecutive ids from ``first_id``."""
    return [list(range(first_id + r * size, first_id + (r + 1) * size)) for r in range(rounds)]
