"""The numbers KEDA's HPA gets: it lands on the plan, or (within its tolerance) stays."""

import math

import pytest

from streamtrain.errors import ScalerRequestError
from streamtrain.keda.contract import (
    SCALE_DOWN_OFFSET,
    TARGET_SIZE,
    hpa_desired_replicas,
    job_of,
    metric_name,
    metric_value,
)


def test_job_comes_from_the_metadata():
    assert job_of({"scalerAddress": "x:1", "job": " ctr-job "}) == "ctr-job"


@pytest.mark.parametrize("metadata", [{}, {"job": ""}, {"job": "  "}, {"jobs": "a"}])
def test_a_missing_job_says_what_to_write(metadata):
    with pytest.raises(ScalerRequestError, match=r"scalerMetadata needs 'job'.*--plan-job"):
        job_of(metadata)


def test_metric_names_are_kubernetes_safe_and_distinct_per_job():
    assert metric_name("CTR_Job.v2") == "streamtrain-planned-workers-ctr-job-v2"
    assert metric_name("a") != metric_name("b")
    assert metric_name("???") == "streamtrain-planned-workers-job"


def test_hpa_formula_matches_kubernetes_for_an_average_value_metric():
    # ratio 30 / (1 * 10) = 3: outside the tolerance, ceil(30 / 1) = 30
    assert hpa_desired_replicas(30, 1, 10) == 30
    # ratio 10.5 / 10 = 1.05: within the default tolerance 0.1, stays at 10
    assert hpa_desired_replicas(10.5, 1, 10) == 10
    assert hpa_desired_replicas(10.5, 1, 10, tolerance=0.0) == 11
    assert hpa_desired_replicas(0.2, 1, 3) == 1  # min replicas
    assert hpa_desired_replicas(50, 1, 3, max_replicas=8) == 8
    with pytest.raises(ValueError, match="at least one replica"):
        hpa_desired_replicas(1, 1, 0)


def _lands(planned, current, tolerance=0.1):
    value = metric_value(planned, current)
    return hpa_desired_replicas(value, TARGET_SIZE, current, tolerance=tolerance)


@pytest.mark.parametrize("current", range(1, 121))
def test_the_hpa_lands_on_the_plan_or_holds_within_its_tolerance(current):
    for planned in range(1, 161):
        got = _lands(planned, current)
        assert got in (planned, current), (planned, current, got)
        value = metric_value(planned, current)
        ratio = int(value * 1000) / (1000 * current)
        if abs(1 - ratio) > 0.1:
            assert got == planned, (planned, current)
        # with the tolerance set to 0 the HPA always lands on the plan
        assert _lands(planned, current, tolerance=0.0) == planned


def test_without_a_known_current_count_the_value_is_the_plan():
    assert metric_value(7, None) == 7.0
    assert metric_value(7, 7) == 7.0
    assert metric_value(0, 4) == 0.0


def test_scale_down_value_still_rounds_up_to_the_plan_in_kedas_milli_units():
    for planned in range(1, 10_001):
        value = metric_value(planned, planned + 1)
        assert value == pytest.approx(planned - 1 + SCALE_DOWN_OFFSET)
        assert math.ceil(int(value * 1000) / 1000) == planned


def test_the_low_end_escapes_the_tolerance_where_the_plan_itself_would_not():
    # 15 -> 14 workers: the value 14 gives ratio 0.933 (held); 13.01 gives 0.867 (applied)
    assert hpa_desired_replicas(14, 1, 15) == 15
    assert _lands(14, 15) == 14
    # from 20 workers, one fewer is within the tolerance whatever the value
    assert _lands(19, 20) == 20
    # one more from 11 workers up is within the tolerance (documented in docs/integrations.md);
    # at 10 the ratio 1.1 is a hair above 1 + 0.1 in floating point, as in Go: applied
    assert _lands(12, 11) == 11
    assert _lands(11, 10) == 11
    assert _lands(10, 9) == 10
