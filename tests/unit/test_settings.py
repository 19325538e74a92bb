"""Worker settings: defaults < config file < environment < flags, with clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalstream.assertions.errors import InputError
from evalstream.stream.settings import load_settings


def test_precedence_file_then_env_then_overrides(tmp_path: Path) -> None:
    config = tmp_path / "worker.yaml"
    config.write_text("broker: file:9092\npartitions: 4\ngrace_ms: 500\nsuites: [a.yaml]\n")
    env = {"EVALSTREAM_PARTITIONS": "6", "EVALSTREAM_SUITES": "b.yaml,c.yaml", "OTHER": "x"}
    settings = load_settings(config, env, {"broker": "flag:9092", "grace_ms": None})
    assert settings.broker == "flag:9092"
    assert settings.partitions == 6
    assert settings.suites == ["b.yaml", "c.yaml"]
    assert settings.grace_ms == 500
    assert settings.topic("signals") == "evalstream.signals"
    assert settings.close_rules().grace_ms == 500


def test_defaults() -> None:
    settings = load_settings(env={})
    assert (settings.partitions, settings.topic_prefix, settings.inactivity_ms) == (
        8,
        "evalstream.",
        300_000,
    )
    with pytest.raises(KeyError):
        settings.topic("nope")


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"EVALSTREAM_PARTITIONS": "zero"}, "'partitions' (from"),
        ({"EVALSTREAM_PARTITIONS": "0"}, "greater than or equal to 1"),
        ({"EVALSTREAM_GRACE_MS": "-1"}, "'grace_ms'"),
    ],
)
def test_bad_values_name_the_setting_and_its_source(env: dict[str, str], fragment: str) -> None:
    with pytest.raises(InputError) as info:
        load_settings(env=env)
    assert fragment in str(info.value)


def test_unknown_setting_in_the_file_lists_the_valid_ones(tmp_path: Path) -> None:
    config = tmp_path / "worker.yaml"
    config.write_text("brokers: x\n")
    with pytest.raises(InputError, match="valid settings: broker, app_id"):
        load_settings(config, {})
