"""The scheduling units of tests/integration/scheduling.py name tests that exist."""

import ast
from pathlib import Path

from tests.integration.scheduling import (
    HEAVY_GROUP,
    HEAVY_TESTS,
    LATE_TESTS,
    MODULE_UNITS,
    order_of,
    unit_of,
)

ROOT = Path(__file__).resolve().parents[2]


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    }


def test_every_heavy_and_late_test_exists():
    for nodeid in HEAVY_TESTS | LATE_TESTS:
        path, name = nodeid.split("::")
        assert name in _test_names(ROOT / path), f"{nodeid} is not a test (renamed?)"


def test_every_module_unit_is_a_test_module():
    for path in MODULE_UNITS:
        assert _test_names(ROOT / path), f"{path} holds no tests"


def test_units():
    heavy = next(iter(HEAVY_TESTS))
    assert unit_of(heavy) == HEAVY_GROUP
    assert unit_of("tests/integration/test_prometheus.py::test_x") == (
        "tests/integration/test_prometheus.py"
    )
    assert unit_of("tests/unit/test_config.py::test_x") is None


def test_the_heavy_chain_goes_first_and_the_late_tests_last():
    late = next(iter(LATE_TESTS))
    heavy = next(iter(HEAVY_TESTS))
    other = "tests/unit/test_config.py::test_x"
    assert sorted([late, other, heavy], key=order_of) == [heavy, other, late]
    assert not HEAVY_TESTS & LATE_TESTS
