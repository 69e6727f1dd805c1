"""The history keys: one encoder and one decoder per kind; malformed keys are skipped."""

import logging

import pytest

from streamtrain.lag.history_keys import (
    ArrivalKey,
    HwmKey,
    LagKey,
    decode_message_key,
    decode_table_key,
    encode_message_key,
    encode_table_key,
)


@pytest.mark.parametrize(
    ("key", "message", "table"),
    [
        (HwmKey("events", 28_333_333), "hwm:events|28333333", "events|28333333"),
        (LagKey("trainer", 7), "lag:trainer|7", "trainer|7"),
        (ArrivalKey("trainer", 12), "arr:trainer|12", "trainer|12"),
    ],
)
def test_each_kind_round_trips(key, message, table):
    assert encode_message_key(key) == message
    assert encode_table_key(key) == table
    assert decode_message_key(message) == key
    assert decode_table_key(type(key), table) == key


def test_names_may_hold_the_separators():
    key = LagKey("team:a|b", -2)  # group ids are free text; a step before 1970 is negative
    assert decode_message_key(encode_message_key(key)) == key
    assert decode_table_key(LagKey, encode_table_key(key)) == key


@pytest.mark.parametrize(
    "text",
    [
        "",
        "events|3",
        "xyz:events|3",
        "hwm:events",
        "hwm:|3",
        "hwm:events|",
        "hwm:events|3.5",
        "hwm:events|three",
        "hwm:events|+3",
        "lag:g| 3",
    ],
)
def test_malformed_message_keys_are_logged_and_skipped(text, caplog):
    with caplog.at_level(logging.WARNING, logger="streamtrain.lag.history_keys"):
        assert decode_message_key(text) is None
    assert text in caplog.text or repr(text) in caplog.text


@pytest.mark.parametrize("text", ["", "trainer", "|4", "trainer|x", "trainer|4|"])
def test_malformed_table_keys_are_logged_and_skipped(text, caplog):
    with caplog.at_level(logging.WARNING, logger="streamtrain.lag.history_keys"):
        assert decode_table_key(ArrivalKey, text) is None
    assert "malformed arr history key" in caplog.text
