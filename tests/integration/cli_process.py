"""Run `streamtrain broker` as a real subprocess and read what it prints (bounded waits)."""

import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

SCRIPT = str(Path(sys.executable).parent / "streamtrain")


def process_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    if pid <= 0:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def process_cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except FileNotFoundError:
        return ""


def tansu_pids() -> set[int]:
    """Live Tansu broker processes on this machine."""
    out = subprocess.run(
        ["pgrep", "-f", "tansu.* broker "], capture_output=True, text=True, check=False
    )
    return {int(pid) for pid in out.stdout.split() if process_alive(int(pid))}


def wait_dead(pid: int, timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not process_alive(pid):
            return True
        time.sleep(0.05)
    return False


@dataclass
class BrokerCLI:
    """A running `streamtrain broker` subprocess."""

    process: subprocess.Popen[str]
    bootstrap: str
    tansu_pid: int
    stderr_lines: list[str] = field(default_factory=list)
    readers: list[threading.Thread] = field(default_factory=list)

    def stop(self, sig: int = signal.SIGINT, timeout_s: float = 15.0) -> int:
        """Signal the CLI and wait for it; the broker is left to the CLI to stop."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout=timeout_s)

    def __enter__(self) -> "BrokerCLI":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.cleanup()

    def cleanup(self) -> None:
        """Make sure nothing of this CLI run is left: processes, reader threads, pipes."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        if process_alive(self.tansu_pid):
            os.kill(self.tansu_pid, signal.SIGKILL)
        for reader in self.readers:
            reader.join(timeout=5)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


def start_broker_cli(*args: str, env: dict[str, str] | None = None, timeout_s: float = 30.0):
    """Start the CLI and wait for its STREAMTRAIN_BOOTSTRAP line and the broker's pid."""
    process = subprocess.Popen(
        [SCRIPT, "broker", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    found: dict[str, str] = {}
    stderr_lines: list[str] = []
    ready = threading.Event()

    def read_stdout() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("STREAMTRAIN_BOOTSTRAP="):
                found["bootstrap"] = line.strip().split("=", 1)[1]

    def read_stderr() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            stderr_lines.append(line)
            match = re.search(r"pid (\d+)", line)
            if match:
                found["pid"] = match.group(1)
                ready.set()
        ready.set()  # stream closed: the process ended

    readers = [threading.Thread(target=t, daemon=True) for t in (read_stdout, read_stderr)]
    for reader in readers:
        reader.start()
    ready.wait(timeout_s)
    deadline = time.monotonic() + 5
    while "pid" in found and "bootstrap" not in found and time.monotonic() < deadline:
        time.sleep(0.01)
    cli = BrokerCLI(
        process, found.get("bootstrap", ""), int(found.get("pid", 0)), stderr_lines, readers
    )
    if not cli.bootstrap or not cli.tansu_pid:
        cli.cleanup()
        raise RuntimeError(f"`streamtrain broker` did not become ready: {''.join(stderr_lines)}")
    return cli


def run_cli(*args: str, env: dict[str, str] | None = None, timeout_s: float = 60.0):
    """Run a `streamtrain` command to completion (bounded) and return the CompletedProcess."""
    return subprocess.run(
        [SCRIPT, *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, **(env or {})},
        check=False,
    )
