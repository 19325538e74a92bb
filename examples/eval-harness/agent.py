"""A stand-in system under test for the example suite, as a `cmd:` target.

    evalstream harness run --suite examples/eval-harness/eval-suite.yaml \\
        --target "cmd:python examples/eval-harness/agent.py" --attempts 3

It reads the question (`{caseId, episodeId, input, ...}`) from stdin and prints its answer as
a `harness:end` signal with `payload.output` on stdout, the way an instrumented agent reports
its final output. `EXAMPLE_AGENT_FAIL=KEY` makes it exit non-zero on that item (a crash).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

FACTORIAL = "def factorial(n):\n    return 1 if n <= 1 else n * factorial(n - 1)\n"
REVERSE_JS = "function reverse(s) {\n  return s.split('').reverse().join('');\n}\n"
EXTRACTION = (
    "Requires PostgreSQL 14+, serves /api/v1/users, configured by the DATABASE_URL "
    "environment variable."
)
REVIEW = (
    "Consider removing this console.log before merging: debug logs clutter production "
    "output. Use the logger with a debug level instead."
)


def users_endpoint(request: dict[str, Any]) -> dict[str, Any]:
    """The users API, in the v2 (`path`) and v1 (`endpoint`) shapes the suite's evals call."""
    if "path" in request:
        meta = {"page": 1, "per_page": 20, "total": 1}
        return {"status": 200, "headers": {"content-type": "application/json"},
                "body": {"data": [{"id": 1}], "meta": meta}}  # fmt: skip
    user = {"id": "1b4e28ba-2fa1-11d2-883f-0016d3cca427", "name": "Ada",
            "email": "ada@example.com", "created_at": "2024-02-01T09:00:00Z"}  # fmt: skip
    pagination = {"page": 1, "per_page": 20, "total": 1}
    return {"status": 200, "body": {"users": [user], "pagination": pagination}}


def answer(case_id: str, question: Any) -> Any:
    if isinstance(question, dict) and ("path" in question or "endpoint" in question):
        return users_endpoint(question)
    if case_id == "reg-quality-001":
        scores = {"specificity": 4.4, "actionability": 4.5, "correctness": 4.8, "tone": 4.7}
        return {"quality_scores": scores}
    content = str(question.get("content", "")) if isinstance(question, dict) else ""
    if content.startswith("Reverse the string: "):
        return content.removeprefix("Reverse the string: ")[::-1]
    if "JavaScript function that reverses" in content:
        return REVERSE_JS
    if "factorial" in content:
        return FACTORIAL
    if content.startswith("Review:"):
        return REVIEW
    return EXTRACTION


def main() -> int:
    request = json.load(sys.stdin)
    case_id = request["caseId"]
    if os.environ.get("EXAMPLE_AGENT_FAIL") == case_id:
        print(f"cannot answer {case_id}", file=sys.stderr)
        return 3
    output = answer(case_id, request["input"])
    print(json.dumps({"name": "harness:end", "payload": {"output": output}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
