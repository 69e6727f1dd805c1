"""docker/: the compose file is valid to docker-compose and names real CLI commands.

No Docker engine runs on the development machines, so images are never built or run
here; Debian's docker-compose 1.29 (installed by `make test`) validates the file.
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from streamtrain.cli import main

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker" / "compose.yaml"
DOCKERFILE = ROOT / "docker" / "Dockerfile"


@pytest.fixture(scope="module")
def compose_bin():
    found = shutil.which("docker-compose")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("docker-compose is missing in CI: `make test` installs it (system-tools)")
        pytest.skip("docker-compose not installed (make system-tools installs it as root)")
    return found


def _config(compose_bin, path, *args):
    return subprocess.run(
        [compose_bin, "-f", str(path), "config", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_compose_file_is_valid_and_has_kafka_control_and_workers(compose_bin):
    result = _config(compose_bin, COMPOSE, "--services")
    assert result.returncode == 0, result.stderr
    assert set(result.stdout.split()) == {"kafka", "control", "worker", "prometheus", "grafana"}


def test_prometheus_and_grafana_get_the_shipped_config(compose_bin):
    rendered = _config(compose_bin, COMPOSE).stdout
    for source in ("prometheus/prometheus.yml", "prometheus/rules", "grafana/provisioning"):
        assert str(ROOT / "docker" / source) in rendered, source
        assert (ROOT / "docker" / source).exists(), source
    # the workers serve /metrics where the scrape config looks for them
    assert "--metrics-port" in rendered and "9100" in rendered


def test_the_validator_rejects_a_broken_file(compose_bin, tmp_path):
    broken = tmp_path / "compose.yaml"
    broken.write_text(
        COMPOSE.read_text().replace(
            "    image: apache/kafka", "    imagee: x\n    image: apache/kafka"
        )
    )
    assert _config(compose_bin, broken, "-q").returncode != 0


def test_kafka_is_kraft_single_node_and_ports_are_loopback(compose_bin):
    rendered = _config(compose_bin, COMPOSE).stdout
    assert "KAFKA_PROCESS_ROLES: broker,controller" in rendered
    published = re.findall(r"^\s*- (\S+:\d+:\d+)", rendered, flags=re.M)
    assert published and all(p.startswith("127.0.0.1:") for p in published)


def test_compose_and_dockerfile_only_use_real_subcommands():
    commands = re.findall(r'command: \["(\w+)"', COMPOSE.read_text())
    assert commands, "no service commands found"
    assert set(commands) <= set(main.commands)
    dockerfile = DOCKERFILE.read_text()
    assert 'ENTRYPOINT ["streamtrain"]' in dockerfile
    assert "-c constraints.txt" in dockerfile


def test_compose_commands_parse_with_the_cli_they_call():
    """Every flag a compose service passes exists (env defaults substituted)."""
    import json

    import click

    for raw in re.findall(r"command: (\[.*\])", COMPOSE.read_text()):
        args = [re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", a) for a in json.loads(raw)]
        command: click.Command = main
        while isinstance(command, click.Group) and args and args[0] in command.commands:
            command = command.commands[args.pop(0)]
        if command.name in {"worker", "demo"} and not command.params:  # not landed yet
            continue
        command.make_context(command.name, list(args))  # raises on an unknown flag
