"""Judges played by the local Messages API server: honest, gullible, broken."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from tests.support.messages_api import MessagesRequest, Reply, Usage

JSON = Any
CRITERIA = ("identifies the SQL injection", "proposes a parameterized query")
GOOD = "The string interpolation allows SQL injection; use a parameterized query instead."
BAD = "Looks fine to me."

_OUTPUT_BLOCK = re.compile(r"<(output-[0-9a-f]{16})>\n(.*)\n</\1>", re.DOTALL)


def output_block(request: MessagesRequest) -> str:
    """The text between the output tag and its own closing tag (what a careful judge reads)."""
    found = _OUTPUT_BLOCK.search(request.last_user_text)
    assert found is not None, "no delimited output block in the prompt"
    return found.group(2)


def criteria_of(request: MessagesRequest) -> list[str]:
    schema = request.body["output_config"]["format"]["schema"]
    return list(schema["properties"]["criteria"]["items"]["properties"]["criterion"]["enum"])


def verdict(scores: Mapping[str, int], reasoning: str = "graded") -> str:
    return json.dumps(
        {
            "criteria": [
                {"criterion": c, "score": s, "reasoning": f"{c}: {s}"} for c, s in scores.items()
            ],
            "reasoning": reasoning,
        }
    )


def honest_judge(keywords: Mapping[str, str], usage: Usage | None = None) -> Any:
    """Scores 5 when the criterion's keyword is in the delimited output, else 1."""

    def handle(request: MessagesRequest) -> Reply:
        text = output_block(request).lower()
        scores = {c: 5 if keywords[c] in text else 1 for c in criteria_of(request)}
        return Reply.text(verdict(scores), usage=usage)

    return handle


KEYWORDS = {CRITERIA[0]: "sql injection", CRITERIA[1]: "parameterized"}
