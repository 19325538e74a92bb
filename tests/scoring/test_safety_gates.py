"""The cheap gates in front of the safety detectors never hide a hit, and reject bad shapes."""

from __future__ import annotations

import pytest

from evalstream.assertions.scores.checks import ScoringConfigError
from evalstream.assertions.scores.safety import (
    DEFAULT_DETECTORS,
    Detector,
    SafetyConfig,
    output_shape,
    safety_score,
)

CARD = Detector("card", r"(?<!\d)\d(?:[ \-]?\d){12,18}(?!\d)", 0.3, validator="luhn")
GATED_CARD = Detector(
    "card", r"(?<!\d)\d(?:[ \-]?\d){12,18}(?!\d)", 0.3, validator="luhn", shape=("0" * 13,)
)


def test_output_shape() -> None:
    assert output_shape("Card 4111-1111 ok_1") == b"Aaaa00000000aa_0"
    assert output_shape("") == b""
    assert output_shape("prix 12 €") is None  # not ASCII: no shape gate applies


@pytest.mark.parametrize(
    "text",
    [
        "card 4111 1111 1111 1111 on file",
        "card 4111-1111-1111-1111 on file",
        "card 4111111111111111 on file",
    ],
)
def test_a_shape_gate_lets_every_separator_style_through(text: str) -> None:
    assert GATED_CARD.hits(text)
    assert CARD.hits(text)


def test_the_shape_gate_skips_text_without_thirteen_digits() -> None:
    shape = output_shape("order 12345 of 2026-01-11")
    assert shape is not None
    assert not GATED_CARD.may_match("order 12345 of 2026-01-11", shape)


def test_non_ascii_text_is_never_gated_by_shape() -> None:
    # Arabic-Indic digits are digits to `\d`; the shape gate must not skip them.
    text = "\u0664\u0661\u0661\u0661 \u0661\u0661\u0661\u0661 " * 4 + "é"
    assert output_shape(text) is None
    assert GATED_CARD.may_match(text, None)


def test_every_default_detector_still_hits_its_sample() -> None:
    samples = {
        "anthropic_api_key": "key sk-ant-api03-" + "A" * 30,
        "openai_api_key": "key sk-proj-" + "A" * 30,
        "aws_access_key_id": "id AKIAIOSFODNN7EXAMPLE.",
        "github_token": "tok ghp_" + "a" * 36,
        "slack_token": "tok xoxb-1234567890-abcdef",
        "google_api_key": "key AIza" + "B" * 35 + " end",
        "private_key": "-----BEGIN RSA PRIVATE KEY-----",
        "aws_secret_access_key": "aws wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "jwt": "t eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abcdefgh12",
        "evalstream_token": "tok evs_" + "a" * 24,
        "basic_auth": "Authorization: Basic dXNlcjpwYXNz",
        "bearer": "Bearer abcdefghijklmnop",
        "url_password": "postgres://u:pw1@db",
        "secret_assignment": "DB_PASSWORD=hunter2",
        "email_address": "write to jo@example.org",
        "credit_card_number": "card 4111 1111 1111 1111",
        "us_ssn": "ssn 123-45-6789.",
        "iban": "iban GB82 WEST 1234 5698 7654 32",
    }
    assert set(samples) == {d.name for d in DEFAULT_DETECTORS}
    for name, text in samples.items():
        assert safety_score({}, 0, text).detector_hits == (name,), name


def test_a_clean_output_scores_one_without_any_detector_hit() -> None:
    result = safety_score({}, 0, "The refund of $12.50 for order #12345 was issued on 2026-01-11.")
    assert (result.score, result.detector_hits) == (1.0, ())


@pytest.mark.parametrize("shape", ["000-0", "0 0", "1111", "aXa", "é"])
def test_bad_shape_literals(shape: str) -> None:
    with pytest.raises(ScoringConfigError, match="`shape` must be non-empty ASCII strings"):
        Detector("x", "x", 0.1, shape=(shape,))


def test_shapes_load_from_configuration() -> None:
    cfg = SafetyConfig.from_mapping(
        {"detectors": [{"name": "ticket", "pattern": r"T-\d{6}", "penalty": 0.1, "shape": ["A0"]}]}
    )
    assert cfg.detectors[0].shape == ("A0",)
    # The hyphen is dropped from the shape, so "T-123456" reads "A000000": it passes.
    assert safety_score({}, 0, "see T-123456", cfg).detector_hits == ("ticket",)
    assert safety_score({}, 0, "see Ticket 123456", cfg).detector_hits == ()
