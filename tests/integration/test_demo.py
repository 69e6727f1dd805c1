"""`streamtrain demo` end to end, as a user runs it: a real process with its embedded
broker, control app and worker pool, its dashboard driven in headless Chromium (Debian's
`chromium` through Playwright; no browser is ever downloaded), a worker killed mid-day,
and Ctrl-C leaving no process behind."""

import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from tests.integration.cli_process import SCRIPT, wait_dead

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]


class Demo:
    """A `streamtrain demo` subprocess; stderr lines are collected as they come."""

    def __init__(self, tmp_path: Path, *args: str) -> None:
        self.run_dir = tmp_path / "run"
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [
                *(SCRIPT, "demo", "--dashboard-port", "0", "--run-dir", str(self.run_dir)),
                # the suite's other processes run at nice 0: niced workers beside them got
                # too little CPU to say READY in 120 s or to step for 30 s
                *("--worker-niceness", "0"),
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "STREAMTRAIN_LOG_LEVEL": "WARNING"},
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)

    def log(self) -> str:
        return "".join(self.lines)[-4000:]

    def dashboard_url(self, timeout_s: float = 60) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for line in self.lines:
                found = re.search(r"dashboard: (http://127\.0\.0\.1:\d+/)", line)
                if found:
                    return found.group(1)
            assert self.process.poll() is None, self.log()
            time.sleep(0.2)
        raise AssertionError(f"no dashboard URL in {timeout_s} s:\n{self.log()}")

    def state(self, url: str) -> dict[str, Any]:
        with urllib.request.urlopen(url + "api/state", timeout=5) as response:  # noqa: S310
            state: dict[str, Any] = json.loads(response.read())
        return state

    def wait_state(self, url: str, predicate, timeout_s: float, what: str) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        state: dict[str, Any] = {}
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log()
            state = self.state(url)
            if predicate(state):
                return state
            time.sleep(0.5)
        raise AssertionError(
            f"timed out waiting for {what}: phase {state.get('phase')}\n{self.log()}"
        )

    def descendants(self) -> set[int]:
        """Every live process below the demo (workers are grandchildren)."""
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
        found: set[int] = set()
        todo = [self.process.pid]
        while todo:
            for child in children.get(todo.pop(), []):
                if child not in found:
                    found.add(child)
                    todo.append(child)
        return found

    def control_app_pid(self) -> int:
        """The control app's pid (``streamtrain lag run --plan-job ...``)."""
        for pid in self.descendants():
            try:
                argv = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"lag" in argv and b"--plan-job" in argv:
                return pid
        raise AssertionError(f"no control app below the demo:\n{self.log()}")

    def finish(self, timeout_s: float) -> str:
        """Wait for the exit; stdout (one summary line) fits the pipe's buffer."""
        self.process.wait(timeout=timeout_s)
        assert self.process.stdout is not None
        return self.process.stdout.read()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self._reader.join(timeout=5)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


def _chromium() -> str:
    path = shutil.which("chromium")
    assert path, "Debian's chromium is missing: `make system-tools` installs it (apt-get)"
    return path


def test_a_short_day_trains_every_record_through_a_killed_worker_and_the_dashboard_shows_it(
    tmp_path,
):
    from playwright.sync_api import sync_playwright

    demo = Demo(
        tmp_path,
        "--duration",
        "90",
        "--kill-worker-at",
        "30",
        "--initial-workers",
        "2",  # the fewest that keep training through the kill: the lightest run
        "--drift-turns-per-day",
        "6",
        # a bound, not a duration: a busy machine trains the short day's last records
        # minutes after it ends (a quiet one seconds)
        "--drain-timeout-s",
        "300",
        "--json",
    )
    try:
        url = demo.dashboard_url()
        demo.wait_state(
            url,
            lambda s: s["phase"] == "running" and len(s["timeline"]["reports"]) >= 5,
            300,  # a bound: the first workers say READY before the day runs
            "the day to run with lag reports",
        )
        # the control app (planner, lag monitor, shard coordinator) dies mid-day: the
        # demo restarts it and it resumes from its changelogs
        control = demo.control_app_pid()
        os.kill(control, signal.SIGKILL)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=_chromium(), args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.goto(url)
                for chart in ("cps", "workers", "heatmap", "slochart"):
                    page.wait_for_function(
                        f"Number(document.getElementById('{chart}').dataset.points || 0) > 0",
                        timeout=30_000,
                    )
                # the workers chart marks each action's pause (a count, maybe 0)
                page.wait_for_function(
                    "document.getElementById('workers').dataset.pauses !== undefined",
                    timeout=30_000,
                )
                assert page.text_content("#pool") not in ("", "-")
                assert (page.text_content("#bypeer") or "").replace(",", "").isdigit()
                # The burst button: a lag spike, then an SLO alert on the page.
                page.click("#burst")
                page.wait_for_selector("#alerts li[data-kind='SLO']", timeout=60_000)
                page.wait_for_function(
                    "[...document.querySelectorAll(\"#alerts li[data-kind='DEMO']\")]"
                    ".some((li) => li.textContent.includes('burst'))",
                    timeout=10_000,
                )
                assert "exited with code -9; replaced" in (page.text_content("#alerts") or "")
                page.wait_for_function(
                    "Number(document.getElementById('auc').dataset.points || 0) > 0",
                    timeout=30_000,
                )
                # the AUC lost to lag, once the run's AUC-against-lag curve is measured
                page.wait_for_function(
                    "/^-?\\d+\\.\\d{4}$/.test(document.getElementById('auclost').textContent)",
                    timeout=120_000,
                )
            finally:
                browser.close()
        out = demo.finish(600)
    finally:
        demo.stop()
    assert demo.process.returncode == 0, demo.log()
    summary = json.loads(out.strip().splitlines()[-1])
    records = summary["records"]
    assert records["produced"] > 1000
    # (a drain that timed out on a machine too busy to train the day says so in phase)
    assert records["lost"] == 0 and records["trained_unique"] == records["produced"], (
        summary["phase"],
        summary["workers"],
    )
    assert records["failed_to_produce"] == 0
    # The workers read shards (the default --assignment), without the shuffle layer:
    # each clean exit's summary line says so, and nothing was trained by a peer.
    exits = [
        json.loads(line)
        for log in (demo.run_dir / "logs").glob("worker-*.log")
        for line in log.read_text().splitlines()
        if line.startswith('{"worker_id"')
    ]
    assert exits and all("shuffle" not in e for e in exits)
    assert records["trained_from_peers"] == 0
    applied = [a for a in summary["actions"] if "mode" in a]
    assert applied and all(a["mode"] == "shards" for a in applied)
    assert all("pause_s" in a and "pause_simulated_s" in a for a in applied)
    assert summary["workers"]["killed"] == 1 and summary["workers"]["replaced"] >= 1
    assert summary["control_app_restarts"] == 1
    # one model (the default engine), and the costs the planner assumed beside the run's
    assert summary["engine"]["kind"] == "torchft" and summary["engine"]["committed_steps"] > 0
    assert set(summary["action_costs"]) == {"assumed", "measured"}
    assert summary["phase"] == "done"
    # an AUC was measured; at 6 turns a day a worker minutes behind ranks clicks
    # backwards, so the online mean is not bounded by chance (0.5) here
    assert 0.0 < summary["auc"]["mean"] < 1.0
    # KALE Fig. 1 for this run: at 6 turns a day a 90-minute-old model is far worse, and
    # the loss the summary reports is looked up on that curve
    lost, detail = summary["auc_lost_to_lag"], summary["auc_lost_to_lag_detail"]
    curve = detail["curve"]
    assert curve["0"] > curve["90"] + 0.05
    assert isinstance(lost, float) and curve["0"] - curve["90"] >= lost
    assert detail["upper_bound_job_lag"] >= lost - 1e-3
    assert detail["mean_lag_simulated_min"] > 0
    assert summary["lag_reports"] > 10 and summary["alerts"] >= 1
    for key in ("slo_violation_rate", "accumulated_lag_min", "scaling_actions", "worker_minutes"):
        assert key in summary


def test_ctrl_c_stops_the_broker_the_control_app_and_every_worker(tmp_path):
    demo = Demo(tmp_path, "--duration", "300", "--initial-workers", "2")
    try:
        url = demo.dashboard_url()
        # The start waits for the workers (torch, torchft's quorum): at the suite's start,
        # beside the type check, that took more than 120 s once.
        demo.wait_state(url, lambda s: s["phase"] == "running", 300, "the day to start")
        started = demo.descendants()
        # the broker, the control app and two workers at least
        assert len(started) >= 4, started
        demo.process.send_signal(signal.SIGINT)
        demo.process.wait(timeout=90)
    finally:
        demo.stop()
    assert demo.process.returncode == 130, demo.log()
    assert [pid for pid in started if not wait_dead(pid, timeout_s=10)] == []


def test_attached_to_a_cluster_it_uses_an_existing_topic_from_its_end(tmp_path, broker):
    """`--bootstrap` + `--topic`: older records in the topic are not the demo's to train."""
    import numpy as np
    from confluent_kafka import Producer

    from streamtrain.ingest.example import SyntheticCtr, split_records
    from streamtrain.kafka import create_topic

    settings = broker.kafka_settings()
    topic = f"existing-{time.monotonic_ns()}"
    create_topic(settings, topic, 4)
    old = SyntheticCtr().sample(200, first_id=10**9)  # ids no demo run produces
    # One record per batch: Tansu's high watermark is then exact (with batching it reads
    # the last batch's base offset + 1, and the demo would start inside that batch).
    producer = Producer(settings.confluent_config(**{"batch.num.messages": 1}))
    for k, value in enumerate(split_records(old)):
        producer.produce(topic, value=value, partition=k % 4)
    assert producer.flush(10) == 0
    demo = Demo(
        tmp_path,
        "--bootstrap",
        broker.bootstrap,
        "--topic",
        topic,
        "--partitions",
        "4",
        "--duration",
        "40",
        "--peak-rate",
        "300",
        "--json",
    )
    try:
        out = demo.finish(300)
    finally:
        demo.stop()
    assert demo.process.returncode == 0, demo.log()
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["topic"] == topic
    assert summary["records"]["produced"] > 100 and summary["records"]["lost"] == 0
    trained = np.concatenate(
        [np.fromfile(path, dtype="<i8") for path in (demo.run_dir / "trained").glob("*.ids")]
    )
    assert trained.size and int(trained.max()) < 10**9  # none of the older records
