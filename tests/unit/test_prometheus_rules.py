"""docker/prometheus/: the scrape config and the alert rules pass `promtool check`, and
the rules' unit tests (`promtool test rules`, one firing scenario per alert) pass.

`promtool` comes with Debian's `prometheus` package (`make test` installs it)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = ROOT / "docker" / "prometheus"
RULES = sorted((PROMETHEUS / "rules").glob("*.yml"))
RULE_TESTS = sorted((PROMETHEUS / "tests").glob("*.yml"))


@pytest.fixture(scope="module")
def promtool():
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is missing in CI: `make test` installs Debian's prometheus")
        pytest.skip("promtool not installed (make system-tools installs Debian's prometheus)")
    return found


def _run(promtool, *args):
    return subprocess.run(
        [promtool, *args], capture_output=True, text=True, timeout=120, check=False, cwd=ROOT
    )


def test_scrape_config_is_valid_and_scrapes_the_three_parts(promtool):
    result = _run(promtool, "check", "config", str(PROMETHEUS / "prometheus.yml"))
    assert result.returncode == 0, result.stdout + result.stderr
    config = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
    jobs = {c["job_name"] for c in config["scrape_configs"]}
    assert jobs == {"streamtrain-control", "streamtrain-worker", "streamtrain-keda"}


def test_rules_pass_promtool_check(promtool):
    assert RULES
    result = _run(promtool, "check", "rules", *map(str, RULES))
    assert result.returncode == 0, result.stdout + result.stderr


def test_rules_pass_their_unit_tests(promtool):
    assert RULE_TESTS
    result = _run(promtool, "test", "rules", *map(str, RULE_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_fails_a_broken_rule_and_a_wrong_expectation(promtool, tmp_path):
    rules = (PROMETHEUS / "rules" / "streamtrain.yml").read_text()
    broken = tmp_path / "rules" / "streamtrain.yml"
    broken.parent.mkdir()
    broken.write_text(
        rules.replace("expr: streamtrain_lag_up == 0", "expr: streamtrain_lag_up ===")
    )
    assert _run(promtool, "check", "rules", str(broken)).returncode != 0
    # the unit tests catch a rule that no longer fires as expected
    broken.write_text(rules.replace("for: 1m", "for: 30m"))
    tests = tmp_path / "tests" / "streamtrain_test.yml"
    tests.parent.mkdir()
    tests.write_text((PROMETHEUS / "tests" / "streamtrain_test.yml").read_text())
    assert _run(promtool, "test", "rules", str(tests)).returncode != 0


def test_every_alert_the_issue_asks_for_is_tested_firing():
    alerts = {
        rule["alert"]
        for path in RULES
        for group in yaml.safe_load(path.read_text())["groups"]
        for rule in group["rules"]
        if "alert" in rule
    }
    assert {
        "StreamtrainSloViolation",
        "StreamtrainLagGrowing",
        "StreamtrainControlAppDown",
        "StreamtrainPlannerInFallback",
        "StreamtrainDeadLettersGrowing",
    } <= alerts
    fired = {
        case["alertname"]
        for path in RULE_TESTS
        for test in yaml.safe_load(path.read_text())["tests"]
        for case in test.get("alert_rule_test", [])
        if case.get("exp_alerts")
    }
    assert alerts <= fired, f"alerts without a firing test: {sorted(alerts - fired)}"
