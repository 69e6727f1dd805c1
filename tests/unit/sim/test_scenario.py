"""Scenario files: what they must say, and the errors that name what is wrong."""

import json

import pytest
from click.testing import CliRunner

from streamtrain.cli import main
from streamtrain.errors import ConfigError
from streamtrain.sim.scenario import (
    MODEL_RATES,
    OfflineSpec,
    load_scenario,
    offline_jobs,
    parse_scenario,
)

GOOD = {
    "capacity_workers": 60,
    "online": [{"name": "ads", "shape": "kale", "peak_workers": 8}],
    "serving": {"name": "search", "shape": "web", "peak_workers": 10},
    "offline": {"jobs": 5},
}


def _without(path, key):
    data = json.loads(json.dumps(GOOD))
    holder = data
    for part in path:
        holder = holder[part]
    del holder[key]
    return data


def test_a_good_scenario_has_its_defaults():
    scenario = parse_scenario(GOOD)
    assert scenario.online[0].alone_cap == 10  # ceil(8 * 7 / 6)
    assert scenario.online[0].pool_cap == 10
    assert scenario.allocators == ("milp", "milp-noforecast", "greedy", "partition", "one-way")
    assert scenario.forecaster == "auto"
    assert scenario.offline.max_workers == 16 and scenario.offline.power_of_two


@pytest.mark.parametrize(
    "path,key,needle",
    [
        ((), "capacity_workers", "the scenario is missing field 'capacity_workers'"),
        ((), "serving", "the scenario is missing field 'serving'"),
        (("online", 0), "peak_workers", "online[0] is missing field 'peak_workers'"),
        (("serving",), "name", "serving is missing field 'name'"),
        (("offline",), "jobs", "offline is missing field 'jobs'"),
        (("online", 0), "shape", "online[0] needs exactly one of 'shape' and 'trace'"),
    ],
)
def test_a_missing_field_is_named(path, key, needle):
    with pytest.raises(ConfigError) as info:
        parse_scenario(_without(path, key))
    assert needle in info.value.message


def test_unknown_fields_and_bad_values_are_named():
    data = json.loads(json.dumps(GOOD))
    data["offline"]["jbos"] = 3
    with pytest.raises(ConfigError, match="offline has unknown field 'jbos'"):
        parse_scenario(data)
    data = json.loads(json.dumps(GOOD))
    data["offline"]["work_worker_hours"] = [5]
    with pytest.raises(ConfigError, match=r"offline.work_worker_hours must be \[low, high\]"):
        parse_scenario(data)
    data = json.loads(json.dumps(GOOD))
    data["capacity_workers"] = 15
    with pytest.raises(ConfigError, match="a static partition cannot exist"):
        parse_scenario(data)


def test_files_in_json_and_toml(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(GOOD))
    assert load_scenario(tmp_path / "a.json").name == "a"
    (tmp_path / "b.toml").write_text(
        "capacity_workers = 60\n"
        '[[online]]\nname = "ads"\nshape = "kale"\npeak_workers = 8\n'
        '[serving]\nname = "search"\nshape = "web"\npeak_workers = 10\n'
        "[offline]\njobs = 5\n"
    )
    assert load_scenario(tmp_path / "b.toml").capacity_workers == 60
    (tmp_path / "c.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not valid json"):
        load_scenario(tmp_path / "c.json")
    with pytest.raises(ConfigError, match="cannot read"):
        load_scenario(tmp_path / "missing.json")


def test_offline_arrivals_are_seeded_and_within_their_bounds():
    spec = OfflineSpec(jobs=30, seed=4, work_worker_hours=(2.0, 20.0), arrival_window_h=12.0)
    jobs = offline_jobs(spec)
    assert jobs == offline_jobs(spec)
    assert [j.arrival_s for j in jobs] == sorted(j.arrival_s for j in jobs)
    assert all(0 <= j.arrival_s < 12 * 3600 for j in jobs)
    assert all(1.9 <= j.worker_hours <= 20.1 for j in jobs)
    assert all(j.model_type in MODEL_RATES for j in jobs)
    assert all(j.deadline_s > j.arrival_s for j in jobs)
    assert offline_jobs(OfflineSpec(jobs=30, seed=5)) != jobs


def test_the_cli_names_a_missing_field(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(_without(("online", 0), "peak_workers")))
    result = CliRunner().invoke(main, ["simulate", "--scenario", str(path)])
    assert result.exit_code == 2
    assert "online[0] is missing field 'peak_workers'" in result.output
