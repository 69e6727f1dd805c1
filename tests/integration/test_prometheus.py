"""A real Prometheus (Debian's) on a loopback port, with the shipped scrape config and
alert rules, scrapes a running `streamtrain lag run` (with its planner), a worker and the
KEDA scaler; a lag series comes back through its HTTP API. The Grafana dashboard reads
only metrics these apps export, and none of its panels is dead."""

import json

import pytest

from tests.dashboard_queries import expressions, load, metric_names, substitute
from tests.integration.prometheus_stack import http_get, start_stack, stop_stack, wait_until
from tests.integration.test_scale_loop import JOB


@pytest.fixture(scope="module")
def stack(broker, tmp_path_factory):
    running = start_stack(broker, tmp_path_factory.mktemp("prometheus-stack"))
    try:
        wait_until(
            lambda: "Ready" in http_get(f"http://127.0.0.1:{running.prometheus_port}/-/ready"),
            60,
            "Prometheus to be ready",
        )
        yield running
    finally:
        stop_stack(running)


def test_prometheus_scrapes_the_control_app_and_returns_a_lag_series(stack):
    group = stack.names["group"]
    events = stack.names["events"]
    expr = f'streamtrain_lag_seconds{{group="{group}"}}'
    series = wait_until(lambda: stack.query(expr), 90, f"{expr} in Prometheus")
    (only,) = series
    assert only["metric"]["job"] == "streamtrain-control"
    assert only["metric"]["topic"] == events and only["metric"]["partition"] == "0"
    lag_s = float(only["value"][1])
    assert lag_s >= 0.0  # never NaN: the exposition would say so, and float() would too
    # the records backlog as Prometheus has it agrees with the app's own JSON page
    records = wait_until(
        lambda: stack.query(f'streamtrain_lag_records{{group="{group}"}}'), 30, "lag records"
    )
    app = json.loads(http_get(f"http://127.0.0.1:{stack.control_port}/groups/{group}/lag"))
    assert 0 < float(records[0]["value"][1]) <= app["total_lag_records"]


def test_every_target_of_the_shipped_jobs_is_up(stack):
    def ups():
        result = stack.query("up")
        return {r["metric"]["job"]: r["value"][1] for r in result}

    wait_until(
        lambda: (
            ups()
            == {"streamtrain-control": "1", "streamtrain-worker": "1", "streamtrain-keda": "1"}
        ),
        90,
        "all three jobs up",
    )


def test_the_shipped_rules_load_and_evaluate(stack):
    url = f"http://127.0.0.1:{stack.prometheus_port}/api/v1/rules"
    body = json.loads(http_get(url))
    rules = [rule for group in body["data"]["groups"] for rule in group["rules"]]
    assert len(rules) >= 8
    wait_until(
        lambda: all(
            r["health"] == "ok"
            for g in json.loads(http_get(url))["data"]["groups"]
            for r in g["rules"]
        ),
        30,
        "every rule evaluated without error",
    )
    # the control app is up: the down alert is not pending or firing
    alerts = json.loads(http_get(f"http://127.0.0.1:{stack.prometheus_port}/api/v1/alerts"))
    names = {a["labels"]["alertname"] for a in alerts["data"]["alerts"]}
    assert "StreamtrainControlAppDown" not in names


def _exported_names(text):
    from prometheus_client.parser import text_string_to_metric_families

    return {
        sample.name for family in text_string_to_metric_families(text) for sample in family.samples
    }


def _wait_for_the_forecast(stack):
    """The planner's first forecast (and with it its series) takes a while."""
    wait_until(
        lambda: stack.query("streamtrain_planner_forecast_records_per_second"),
        150,
        "the planner's forecast in Prometheus",
    )


def test_the_dashboard_reads_only_metrics_the_running_apps_export(stack):
    _wait_for_the_forecast(stack)
    exported = set().union(*(_exported_names(text) for text in stack.app_metrics().values()))
    for where, expr, _ in expressions(load()):
        missing = metric_names(expr) - exported
        assert not missing, f"{where} reads {sorted(missing)}, which no running app exports"


def test_every_dashboard_panel_has_data_in_prometheus(stack):
    """No dead panels: each panel query, with the variables a user would pick, returns
    series from the real Prometheus scraping the running apps (annotations and variable
    queries must at least evaluate: a scaling action need not have happened)."""
    values = {"group": stack.names["group"], "job": JOB, "datasource": "prometheus"}
    _wait_for_the_forecast(stack)
    for where, expr, kind in expressions(load()):
        if kind == "variable":
            continue
        query = substitute(expr, values)
        if kind == "panel":
            wait_until(lambda q=query: stack.query(q), 90, f"data for {where}: {query}")
        else:
            stack.query(query)  # evaluates (status success), data or not
    # the variables' values exist: label_values(metric, label) has the picked values
    assert stack.query(f'streamtrain_lag_group_records{{group="{values["group"]}"}}')
    assert stack.query(f'streamtrain_keda_planned_workers{{streamtrain_job="{JOB}"}}')
