"""docker/grafana: the dashboard JSON is well formed for Grafana, draws what the issue
asks for, and its PromQL reads streamtrain's metrics (which metrics a running app exports
is checked in tests/integration/test_prometheus.py); the provisioning files point at it."""

import re

import yaml

from tests.dashboard_queries import DASHBOARD, expressions, load, metric_names

PANEL_TYPES = {"row", "timeseries", "heatmap", "stat", "gauge", "table", "bargauge", "text"}


def test_the_dashboard_is_well_formed():
    dashboard = load()
    assert dashboard["uid"] == "streamtrain" and dashboard["title"]
    assert isinstance(dashboard["schemaVersion"], int)
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    for panel in dashboard["panels"]:
        assert panel["type"] in PANEL_TYPES, panel["type"]
        grid = panel["gridPos"]
        assert grid["w"] > 0 and grid["h"] > 0 and grid["x"] >= 0 and grid["x"] + grid["w"] <= 24
        if panel["type"] == "row":
            continue
        assert panel["targets"], f"{panel['title']} has no query"
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs))
    for where, expr, _ in expressions(dashboard):
        assert expr.strip(), where
        assert expr.count("(") == expr.count(")"), where
        assert expr.count("{") == expr.count("}"), where
        for used in re.findall(r"\$(\w+)", expr):
            assert used in variables, f"{where} uses ${used}, which is not a variable"


def test_no_two_panels_overlap():
    cells = set()
    for panel in load()["panels"]:
        grid = panel["gridPos"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps another panel"
                cells.add((x, y))


def _panels_reading(dashboard, metric):
    return [
        panel
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
        if metric in metric_names(target["expr"])
    ]


def test_it_draws_what_the_issue_asks_for():
    dashboard = load()
    heatmaps = {p["title"] for p in dashboard["panels"] if p["type"] == "heatmap"}
    assert {p["title"] for p in _panels_reading(dashboard, "streamtrain_lag_records")} & heatmaps
    assert {p["title"] for p in _panels_reading(dashboard, "streamtrain_lag_seconds")} & heatmaps
    assert _panels_reading(dashboard, "streamtrain_lag_group_records_per_second")  # CPS
    forecast = _panels_reading(dashboard, "streamtrain_planner_forecast_records_per_second")
    assert any(
        p in _panels_reading(dashboard, "streamtrain_lag_group_records_per_second")
        for p in forecast
    )
    assert _panels_reading(dashboard, "streamtrain_planner_current_workers")  # workers
    assert _panels_reading(dashboard, "streamtrain_worker_shuffle_records_forwarded_total")
    assert _panels_reading(dashboard, "streamtrain_lag_slo_violation_seconds")  # SLO
    annotations = [a for a in dashboard["annotations"]["list"] if "expr" in a]
    assert any(
        "streamtrain_planner_last_command_timestamp_seconds" in metric_names(a["expr"])
        for a in annotations
    ), "scaling actions must be annotations"


def test_every_query_reads_streamtrain_metrics_only():
    for where, expr, _ in expressions(load()):
        names = metric_names(expr)
        assert names, f"{where} reads no metric: {expr}"
        assert all(n.startswith("streamtrain_") for n in names), (where, names)


def test_metric_name_extraction():
    expr = (
        'avg_over_time((max by (group) (streamtrain_lag_group_max_seconds{group=~"$g"}) '
        "> bool on () group_left () max(streamtrain_lag_slo_violation_seconds))[24h:1m])"
    )
    assert metric_names(expr) == {
        "streamtrain_lag_group_max_seconds",
        "streamtrain_lag_slo_violation_seconds",
    }
    assert metric_names('max by (streamtrain_job) (x{streamtrain_job="a"})') == {"x"}
    assert metric_names("label_values(streamtrain_lag_group_records, group)") == {
        "streamtrain_lag_group_records"
    }
    assert metric_names("sum(rate(a_total[1m])) / ignoring (w) b and c") == {"a_total", "b", "c"}


def test_provisioning_points_grafana_at_prometheus_and_the_dashboards():
    root = DASHBOARD.parents[1] / "provisioning"
    (source,) = yaml.safe_load((root / "datasources" / "prometheus.yaml").read_text())[
        "datasources"
    ]
    assert source["type"] == "prometheus" and source["url"] == "http://prometheus:9090"
    (provider,) = yaml.safe_load((root / "dashboards" / "streamtrain.yaml").read_text())[
        "providers"
    ]
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards"
