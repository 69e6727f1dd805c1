"""A running streamtrain (control app with a planner, a worker, the KEDA scaler) scraped
by a real Prometheus (Debian's `prometheus`) on a loopback port, for the tests that check
the shipped scrape config, alert rules and Grafana dashboard against it."""

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from confluent_kafka import Consumer, TopicPartition

from streamtrain.broker import free_port
from streamtrain.kafka import create_topic
from tests.integration.cli_process import SCRIPT
from tests.integration.keda_process import ScalerProcess
from tests.integration.lag_process import FAST_SESSION_S, start_lag_app, stop_process
from tests.integration.test_scale_loop import JOB, Traffic

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "docker" / "prometheus"


def prometheus_binary():
    found = shutil.which("prometheus")
    assert found, "Debian's prometheus is missing: `make system-tools` installs it (apt-get)"
    return found


def http_get(url, timeout_s=5.0):
    with urllib.request.urlopen(url, timeout=timeout_s) as response:  # noqa: S310 - loopback
        return response.read().decode()


def loopback_config(targets, interval_s=1):
    """The shipped prometheus.yml with every job's discovery replaced by loopback targets
    (same job names, same rules), scraping and evaluating every ``interval_s``."""
    config = yaml.safe_load((SHIPPED / "prometheus.yml").read_text())
    config["global"]["scrape_interval"] = f"{interval_s}s"
    config["global"]["evaluation_interval"] = f"{interval_s}s"
    for job in config["scrape_configs"]:
        for key in [k for k in job if k.endswith("_sd_configs") or k == "static_configs"]:
            del job[key]
        job["static_configs"] = [{"targets": targets[job["job_name"]]}]
    return config


@dataclass
class Stack:
    names: dict[str, str]
    prometheus_port: int
    control_port: int
    worker_port: int
    scaler: ScalerProcess
    traffic: Traffic
    logs: Path
    processes: list[tuple[subprocess.Popen[str], object]] = field(default_factory=list)

    def query(self, expr, at_s=None):
        params = {"query": expr}
        if at_s is not None:
            params["time"] = f"{at_s:.3f}"
        url = f"http://127.0.0.1:{self.prometheus_port}/api/v1/query?" + urllib.parse.urlencode(
            params
        )
        body = json.loads(http_get(url))
        assert body["status"] == "success", body
        return body["data"]["result"]

    def app_metrics(self):
        """The /metrics text of the control app, the worker and the scaler."""
        return {
            "control": http_get(f"http://127.0.0.1:{self.control_port}/metrics"),
            "worker": http_get(f"http://127.0.0.1:{self.worker_port}/metrics"),
            "keda": http_get(self.scaler.metrics_url),
        }


def wait_until(predicate, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
        except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what} (last: {last!r})")


def start_stack(broker, tmp_path):
    """Everything of the module docstring; ``stop_stack`` stops it."""
    suffix = time.monotonic_ns()
    names = {
        k: f"{k}-{suffix}"
        for k in ("events", "group", "samples", "commands", "alerts", "reports", "app")
    }
    settings = broker.kafka_settings()
    for key in ("events", "samples", "commands", "alerts", "reports"):
        create_topic(settings, names[key], 1, exist_ok=True)
    committer = Consumer(settings.confluent_config(**{"group.id": names["group"]}))
    committer.commit(offsets=[TopicPartition(names["events"], 0, 0)], asynchronous=False)
    committer.close()
    processes = []
    traffic = Traffic(settings, names["events"], names["samples"])
    traffic.start()
    control_port, worker_port, prometheus_port = free_port(), free_port(), free_port()
    app, app_log = start_lag_app(
        broker.bootstrap,
        names["group"],
        control_port,
        tmp_path / "control.log",
        *("--app-id", names["app"], "--reports-topic", names["reports"]),
        *("--alerts-topic", names["alerts"], "--plan-job", JOB, "--policy", "streamtrain"),
        *("--policy-setting", "decision_interval_s=1", "--samples-topic", names["samples"]),
        *("--commands-topic", names["commands"], "--plan-step-s", "1"),
        *("--sample-bucket-s", "1", "--action-pause-s", "5", "--max-workers", "4"),
        session_timeout_s=FAST_SESSION_S,
    )
    processes.append((app, app_log))
    # A worker of another group on the same topic: the records are not CTR examples,
    # so it dead-letters them (its DLQ series move); its samples are for its own job.
    worker_log = open(tmp_path / "worker.log", "w")  # noqa: SIM115 - closed by stop_stack
    worker = subprocess.Popen(
        [
            SCRIPT,
            "worker",
            *("--bootstrap", broker.bootstrap, "--topic", names["events"]),
            *("--group", f"{names['group']}-w", "--metrics-port", str(worker_port)),
            *("--throughput-topic", names["samples"], "--connect-timeout-s", "5"),
        ],
        stdout=worker_log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    processes.append((worker, worker_log))
    scaler = ScalerProcess(
        broker.bootstrap, "--commands-topic", names["commands"], "--samples-topic", names["samples"]
    )
    scaler_port = int(scaler.metrics_url.rsplit(":", 1)[1].split("/")[0])
    config_dir = tmp_path / "prometheus"
    shutil.copytree(SHIPPED / "rules", config_dir / "rules")
    targets = {
        "streamtrain-control": [f"127.0.0.1:{control_port}"],
        "streamtrain-worker": [f"127.0.0.1:{worker_port}"],
        "streamtrain-keda": [f"127.0.0.1:{scaler_port}"],
    }
    (config_dir / "prometheus.yml").write_text(yaml.safe_dump(loopback_config(targets)))
    prometheus_log = open(tmp_path / "prometheus.log", "w")  # noqa: SIM115
    prometheus = subprocess.Popen(
        [
            prometheus_binary(),
            f"--config.file={config_dir / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{prometheus_port}",
            "--log.level=warn",
        ],
        stdout=prometheus_log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    processes.append((prometheus, prometheus_log))
    return Stack(
        names, prometheus_port, control_port, worker_port, scaler, traffic, tmp_path, processes
    )


def stop_stack(stack):
    stack.traffic.stop.set()
    stack.traffic.join(timeout=15)
    stack.scaler.stop()
    for process, log in reversed(stack.processes):
        stop_process(process, log)
