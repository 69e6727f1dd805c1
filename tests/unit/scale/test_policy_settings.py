"""One parser for every policy's settings: unknown keys, types, nesting, CLI strings."""

from dataclasses import dataclass, field

import pytest

from streamtrain.errors import ConfigError
from streamtrain.scale.policies import (
    QUANTILE_SETTING,
    AdequateSettings,
    HpaPolicySettings,
    KaleSettings,
    MaduSettings,
    StreamtrainSettings,
    planning_level,
)
from streamtrain.scale.policy_settings import parse_policy_settings, settings_from
from streamtrain.scale.trigger import TriggerSettings


@dataclass(frozen=True, slots=True)
class Inner:
    low: float = 1.0
    high: float = 2.0

    def __post_init__(self) -> None:
        if self.low > self.high:
            raise ConfigError("need low <= high")


@dataclass(frozen=True, slots=True)
class Example:
    rate: float = 0.5
    count: int = 3
    on: bool = True
    name: str = "a"
    limit: int | None = None
    inner: Inner = field(default_factory=lambda: Inner(high=5.0))


def test_no_overrides_give_the_defaults():
    assert settings_from(Example, {}, policy="p") == Example()


def test_values_of_the_fields_types_are_kept():
    got = settings_from(Example, {"rate": 2.5, "count": 7, "on": False, "name": "b"}, policy="p")
    assert got == Example(rate=2.5, count=7, on=False, name="b")


def test_an_unknown_key_names_the_policy_and_the_key():
    with pytest.raises(ConfigError, match=r"bad settings for policy 'hpa'.*'colour'.*metric"):
        settings_from(HpaPolicySettings, {"colour": "blue"}, policy="hpa")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("rate", "fast"),
        ("rate", True),
        ("count", 2.5),
        ("count", "three"),
        ("count", False),
        ("on", 2),
        ("on", "yes"),
        ("name", 1),
        ("limit", "none"),
        ("inner", {"low": 1.0}),
    ],
)
def test_a_wrong_type_names_the_policy_the_key_and_the_type(key, value):
    with pytest.raises(ConfigError, match=rf"bad settings for policy 'p': {key} must be of type"):
        settings_from(Example, {key: value}, policy="p")


def test_the_clis_strings_are_parsed_by_the_fields_type():
    got = settings_from(
        Example, {"rate": "3", "count": "3", "on": "false", "name": "3"}, policy="p"
    )
    assert got == Example(rate=3.0, count=3, on=False, name="3")
    assert isinstance(got.rate, float) and isinstance(got.count, int)


def test_what_parse_policy_settings_makes_of_cli_text_is_accepted():
    parsed = dict(parse_policy_settings({"rate": "3", "count": "3", "on": "1", "limit": "4.0"}))
    assert parsed == {"rate": 3, "count": 3, "on": 1, "limit": 4.0}
    got = settings_from(Example, parsed, policy="p")
    assert got == Example(rate=3.0, count=3, on=True, limit=4)
    assert isinstance(got.rate, float) and isinstance(got.limit, int)


def test_optional_fields_take_none_or_their_type():
    assert settings_from(Example, {"limit": None}, policy="p").limit is None
    assert settings_from(Example, {"limit": "12"}, policy="p").limit == 12
    assert settings_from(AdequateSettings, {"workers": 4}, policy="adequate").workers == 4


def test_nested_settings_take_prefixed_keys_on_top_of_the_fields_default():
    got = settings_from(Example, {"inner_low": "4"}, policy="p")
    assert got.inner == Inner(low=4.0, high=5.0)  # the outer default's high, not Inner's
    whole = settings_from(Example, {"inner": Inner(0.0, 9.0), "inner_high": 8.0}, policy="p")
    assert whole.inner == Inner(0.0, 8.0)
    with pytest.raises(ConfigError, match=r"'inner_nope' \(known: inner_low, inner_high\)"):
        settings_from(Example, {"inner_nope": 1.0}, policy="p")
    with pytest.raises(ConfigError, match=r"'outer_low' \(known: rate, .*, inner_<field>\)"):
        settings_from(Example, {"outer_low": 1.0}, policy="p")
    with pytest.raises(ConfigError, match="inner_low must be of type float"):
        settings_from(Example, {"inner_low": "low"}, policy="p")


def test_bad_values_are_a_config_error_naming_the_policy():
    with pytest.raises(ConfigError, match="policy 'p': need low <= high"):
        settings_from(Example, {"inner_low": 6.0}, policy="p")
    with pytest.raises(ConfigError, match="policy 'kale'"):
        settings_from(KaleSettings, {"horizon_s": 0}, policy="kale")


def test_the_streamtrain_policys_trigger_keys():
    got = settings_from(StreamtrainSettings, {"trigger_lag_exit_s": "90"}, policy="streamtrain")
    assert got.trigger == TriggerSettings(
        lag_enter_s=300.0, lag_exit_s=90.0, error_enter=0.5, error_exit=0.25
    )
    with pytest.raises(ConfigError, match="lag_exit_s <= lag_enter_s"):
        settings_from(StreamtrainSettings, {"trigger_lag_exit_s": 400.0}, policy="streamtrain")


def test_parse_policy_settings_types_cli_text_without_knowing_the_policy():
    assert parse_policy_settings({"a": "1", "b": "0.5", "c": "true", "d": "x"}) == (
        ("a", 1),
        ("b", 0.5),
        ("c", True),
        ("d", "x"),
    )
    assert dict(parse_policy_settings({"c": " FALSE ", "e": "1e3"})) == {"c": False, "e": 1000.0}


def test_a_literal_field_takes_one_of_its_values():
    got = settings_from(HpaPolicySettings, {"metric": "lag", "target": "60"}, policy="hpa")
    assert (got.metric, got.target) == ("lag", 60.0)
    with pytest.raises(ConfigError, match=r"metric must be one of 'utilization', 'lag', got 'cpu'"):
        settings_from(HpaPolicySettings, {"metric": "cpu"}, policy="hpa")


def test_the_planning_level_is_the_policys_quantile_setting_or_its_default():
    assert planning_level("streamtrain", {}) == StreamtrainSettings().quantile
    assert planning_level("madu", {}) == MaduSettings().uncertainty_level
    assert planning_level("streamtrain", {"quantile": 0.8, "headroom": 0.1}) == 0.8
    assert planning_level("madu", {"uncertainty_level": 0.9}) == 0.9
    assert planning_level("kale", {"quantile": 0.8}) is None  # kale plans on no quantile
    assert planning_level("hpa", {}) is None
    assert set(QUANTILE_SETTING) == {"streamtrain", "madu"}
    for bad in ({"quantile": "high"}, {"quantile": True}, {"quantile": 1.5}, {"colour": 1}):
        with pytest.raises(ConfigError, match="bad settings for policy 'streamtrain'"):
            planning_level("streamtrain", bad)
