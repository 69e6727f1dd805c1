"""The PromQL of docker/grafana's dashboard: every expression with where it sits, and the
metric names each one reads (for the structural test and the one against live apps)."""

import json
import re
from pathlib import Path

DASHBOARD = (
    Path(__file__).resolve().parents[1] / "docker" / "grafana" / "dashboards" / "streamtrain.json"
)

_KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring"}
_CLAUSE = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_LABEL_VALUES = re.compile(r"^\s*label_values\(\s*([a-zA-Z_:][\w:]*)\s*,\s*(\w+)\s*\)\s*$")


def load():
    return json.loads(DASHBOARD.read_text())


def expressions(dashboard):
    """``(where, expr, kind)``: kind is "panel", "annotation" or "variable"."""
    found = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            found.append((f"panel {panel['title']!r} {target['refId']}", target["expr"], "panel"))
    for annotation in dashboard["annotations"]["list"]:
        if "expr" in annotation:
            found.append((f"annotation {annotation['name']!r}", annotation["expr"], "annotation"))
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            found.append((f"variable ${variable['name']}", variable["query"]["query"], "variable"))
    return found


def metric_names(expr):
    """The metric names an expression (or a ``label_values(metric, label)``) reads."""
    match = _LABEL_VALUES.match(expr)
    if match:
        return {match.group(1)}
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', expr)  # strings
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges and subqueries
    text = _CLAUSE.sub("", text)  # by (...), on (...), group_left (...)
    names = set()
    for name, paren in re.findall(r"([a-zA-Z_:][\w:]*)\s*(\(?)", text):
        if not paren and name not in _KEYWORDS:
            names.add(name)
    return names


def substitute(expr, values):
    """Grafana's variables as a user would pick them (``$name`` -> a regex alternative)."""
    for name, value in values.items():
        expr = expr.replace(f"${name}", value)
    return expr
