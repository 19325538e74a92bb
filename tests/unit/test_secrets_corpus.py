"""One list of secret shapes serves the gateway's redaction and the safety detectors.

The corpus (`data/secrets_corpus.yaml`) holds shape-correct fake credentials that both must
catch, and look-alikes (UUIDs, git SHAs, digests, token counts, URLs without a password, ...)
that must survive redaction unchanged and hit no secret detector.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from evalstream.assertions.scores.safety import DEFAULT_DETECTORS, safety_score
from evalstream.assertions.scores.secrets import SECRET_PATTERNS, is_secret_name, name_words
from evalstream.connectors.gateway.redaction import REDACTED, Redactor

CORPUS: dict[str, Any] = yaml.safe_load(
    (Path(__file__).parent / "data" / "secrets_corpus.yaml").read_text(encoding="utf-8")
)
SECRET_KINDS = {p.name for p in SECRET_PATTERNS}


def test_the_corpus_covers_every_shape_and_the_detectors_are_the_shared_list() -> None:
    assert {entry["kind"] for entry in CORPUS["secrets"]} == SECRET_KINDS
    assert len(CORPUS["secrets"]) + len(CORPUS["secret_keys"]) >= 60
    assert {d.name for d in DEFAULT_DETECTORS} >= SECRET_KINDS


@pytest.mark.parametrize("entry", CORPUS["secrets"], ids=lambda e: e["text"][:40])
def test_a_secret_shape_is_redacted_in_the_gateway(entry: dict[str, str]) -> None:
    redactor = Redactor()
    for value in (entry["text"], {"note": entry["text"]}, [f"before {entry['text']}"]):
        assert redactor.needs_walk(orjson.dumps(value)), "the pre-filter skipped a secret"
        out = orjson.dumps(redactor.redact(value)).decode()
        assert entry["secret"] not in out
        assert f"[REDACTED:{entry['kind']}]" in out
    assert redactor.counts[entry["kind"]] >= 3


@pytest.mark.parametrize("entry", CORPUS["secrets"], ids=lambda e: e["text"][:40])
def test_a_secret_shape_is_a_safety_detector_hit(entry: dict[str, str]) -> None:
    result = safety_score({}, 0, entry["text"])
    assert entry["kind"] in result.detector_hits
    assert result.score < 0.8  # a leaked credential is CRITICAL territory


def test_a_url_password_keeps_the_user_and_host() -> None:
    out = Redactor().redact("postgres://admin:hunter2@db.internal:5432/app")
    assert out == "postgres://admin:[REDACTED:url_password]@db.internal:5432/app"


def test_header_lines_keep_their_name_and_scheme() -> None:
    redactor = Redactor()
    assert redactor.redact("x-api-key: abc123def") == "x-api-key: [REDACTED:secret_assignment]"
    assert (
        redactor.redact("Authorization: Basic dXNlcjpodW50ZXIy")
        == "Authorization: Basic [REDACTED:basic_auth]"
    )


@pytest.mark.parametrize("name", CORPUS["secret_keys"])
def test_a_secret_key_name_is_redacted_whole(name: str) -> None:
    assert is_secret_name(name), name_words(name)
    redactor = Redactor()
    record = {"env": {name: "v4lue-FAKE", "other": 1}}
    assert redactor.needs_walk(orjson.dumps(record))
    assert redactor.redact(record) == {"env": {name: REDACTED, "other": 1}}
    # as an assignment inside a string, too
    assert "v4lue-FAKE" not in redactor.redact(f"{name}=v4lue-FAKE")


@pytest.mark.parametrize("name", CORPUS["kept_keys"])
def test_a_look_alike_key_name_is_kept(name: str) -> None:
    assert not is_secret_name(name), name_words(name)
    record = {name: "v4lue-FAKE0123"}
    assert Redactor().redact(record) == record


@pytest.mark.parametrize("text", CORPUS["lookalikes"])
def test_a_look_alike_survives_and_hits_no_secret_detector(text: str) -> None:
    redactor = Redactor()
    assert redactor.redact(text) == text
    assert redactor.redact({"note": text}) == {"note": text}
    hits = set(safety_score({}, 0, text).detector_hits)
    assert not hits & SECRET_KINDS, hits


def test_camel_case_and_separators_split_names() -> None:
    assert name_words("X-Api-Key") == ["x", "api", "key"]
    assert name_words("awsSecretAccessKey") == ["aws", "secret", "access", "key"]
    assert name_words("OPENAI_API_KEY") == ["openai", "api", "key"]
    assert name_words("HTTPAuthToken") == ["http", "auth", "token"]
