"""Re-issuing recorded LLM requests to a Messages API (a candidate model, or the proxy).

`request_of` finds the request a recorded `provider:start` carried (the full request body as
`payload.request` or `payload.input`, or the message list as `payload.input`);
`MessagesClient` sends it with httpx to `<base_url>/v1/messages` and turns the answer into
what a `provider:end` payload holds (content, tool calls, usage, duration) or an error.
Rate limits, overload, server errors and network errors are retried by the shared
`evalstream.connectors.retry_policy.BackoffPolicy` (the server's `retry-after` honoured, capped).
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from evalstream.connectors.retry_policy import (
    Attempt,
    BackoffPolicy,
    Sleep,
    api_should_retry,
    retry_after_s,
)

JSON = Any
API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 1024


def request_of(payload: JSON) -> dict[str, JSON] | None:
    """The Messages API request body a `provider:start` payload recorded, if any."""
    if not isinstance(payload, dict):
        return None
    for key in ("request", "input"):
        value = payload.get(key)
        if isinstance(value, dict) and isinstance(value.get("messages"), list):
            return dict(value)
    messages = payload.get("input")
    if (
        isinstance(messages, list)
        and messages
        and all(isinstance(m, dict) and "role" in m for m in messages)
    ):
        body: dict[str, JSON] = {"messages": messages}
        if isinstance(payload.get("model"), str):
            body["model"] = payload["model"]
        return body
    return None


@dataclass(frozen=True)
class CandidateReply:
    """One answer of the candidate, as a `provider:end` (or `provider:error`) payload."""

    model: str
    duration_ms: float
    content: str = ""
    tool_calls: list[dict[str, JSON]] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    stop_reason: str | None = None
    error: str | None = None
    status: int | None = None

    def end_payload(self) -> dict[str, JSON]:
        if self.error is not None:
            return {
                "model": self.model,
                "status": self.status,
                "message": self.error,
                "durationMs": self.duration_ms,
            }
        return {
            "model": self.model,
            "output": {"content": self.content, "toolCalls": self.tool_calls, "usage": self.usage},
            "stopReason": self.stop_reason,
            "durationMs": self.duration_ms,
        }


def _reply(model: str, duration_ms: float, body: JSON) -> CandidateReply:
    blocks = body.get("content") if isinstance(body, dict) else None
    texts: list[str] = []
    calls: list[dict[str, JSON]] = []
    for block in blocks if isinstance(blocks, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block.get("type") == "tool_use":
            calls.append(
                {"id": block.get("id"), "name": block.get("name"), "input": block.get("input")}
            )
    usage = body.get("usage") if isinstance(body, dict) else None
    inp = int(usage.get("input_tokens") or 0) if isinstance(usage, dict) else 0
    out = int(usage.get("output_tokens") or 0) if isinstance(usage, dict) else 0
    return CandidateReply(
        model=str(body.get("model") or model),
        duration_ms=duration_ms,
        content="".join(texts),
        tool_calls=calls,
        usage={"inputTokens": inp, "outputTokens": out, "totalTokens": inp + out},
        stop_reason=body.get("stop_reason"),
    )


class MessagesClient:
    """Sends Messages API requests; retries what the API says is worth retrying."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        model: str | None = None,
        timeout_s: float = 120.0,
        retries: int = 2,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.model = model
        self.retries = retries
        self.policy = BackoffPolicy(
            initial_s=backoff_initial_s, max_s=backoff_max_s, max_attempts=retries + 1
        )
        self._sleep = sleep
        self._rng = rng or random.Random()
        headers = {"anthropic-version": API_VERSION, "content-type": "application/json"}
        if api_key:
            headers["x-api-key"] = api_key
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s, transport=transport
        )

    def prepare(self, request: dict[str, JSON]) -> dict[str, JSON]:
        """The recorded request for the candidate: its model, no streaming."""
        body = {k: v for k, v in request.items() if k != "stream"}
        if self.model:
            body["model"] = self.model
        body.setdefault("max_tokens", DEFAULT_MAX_TOKENS)
        return body

    async def create(self, request: dict[str, JSON]) -> CandidateReply:
        """The candidate's answer; after `retries` retries, the last error as a reply."""
        body = self.prepare(request)
        model = str(body.get("model") or "")

        async def attempt() -> Attempt[CandidateReply]:
            started = time.perf_counter()
            try:
                response = await self._http.post("/v1/messages", json=body)
            except httpx.HTTPError as exc:
                elapsed = (time.perf_counter() - started) * 1000.0
                error = f"{type(exc).__name__}: {exc}"
                return Attempt(CandidateReply(model, elapsed, error=error), retryable=True)
            elapsed = (time.perf_counter() - started) * 1000.0
            status = response.status_code
            if status == 200:
                return Attempt(_reply(model, elapsed, response.json()))
            failed = CandidateReply(model, elapsed, error=_error_message(response), status=status)
            return Attempt(
                failed,
                retryable=api_should_retry(status, response.headers),
                retry_after_s=retry_after_s(response.headers, time.time()),
            )

        last = await self.policy.run(attempt, rng=self._rng, sleep=self._sleep)
        return last.result

    async def close(self) -> None:
        await self._http.aclose()


def _error_message(response: httpx.Response) -> str:
    try:
        error = response.json().get("error", {})
        return f"{response.status_code} {error.get('type')}: {error.get('message')}"
    except (ValueError, AttributeError):
        return f"{response.status_code}: {response.text[:200]}"
