"""A live smoke test against the real API; it runs only when ANTHROPIC_API_KEY is set."""

from __future__ import annotations

import asyncio
import os

import pytest

from evalstream.assertions.judge.protocol import JudgeRequest
from evalstream.connectors.anthropic_api.judge import AnthropicJudge, JudgeSettings
from tests.graders.judge_helpers import BAD, CRITERIA, GOOD

pytestmark = pytest.mark.skipif(
    not os.environ.get("ANTHROPIC_API_KEY"), reason="no ANTHROPIC_API_KEY: live judge not run"
)


def test_live_judge_separates_a_good_from_a_bad_review() -> None:
    model = os.environ.get("EVALSTREAM_JUDGE_MODEL", "claude-haiku-4-5")

    async def run() -> tuple[float, float]:
        async with AnthropicJudge(JudgeSettings.from_env(model=model)) as judge:
            good, bad = await asyncio.gather(
                judge.judge(JudgeRequest(criteria=CRITERIA, output=GOOD, min_score=0.7)),
                judge.judge(JudgeRequest(criteria=CRITERIA, output=BAD, min_score=0.7)),
            )
        assert good.cost_usd > 0
        return good.score, bad.score

    good, bad = asyncio.run(run())
    assert good >= 0.7 > bad
