"""An HTTP endpoint as a target: POST the case, get the signals back.

Request: `POST <url>` with JSON `{caseId, episodeId, input, attrs, config}`.
Response (200): a JSON list of signal objects, `{"signals": [...], "output": ...}`, or NDJSON
(`application/x-ndjson`, one signal per line). Any other status is a target error naming the
status and the start of the body. A timeout or cancellation closes the request.
"""

from __future__ import annotations

from typing import Any

import httpx
import orjson

from evalstream.assertions.errors import TargetError
from evalstream.connectors.targets.base import TargetCall, TargetOutput

JSON = Any
BODY_PREVIEW = 300


class HttpTarget:
    def __init__(
        self,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.url = url
        self.headers = headers or {}
        self._own_client = client is None
        # No client-side timeout: the runner's case timeout governs (and cancels) each call.
        self.client = client or httpx.AsyncClient(timeout=None)

    def describe(self) -> str:
        return self.url

    async def aclose(self) -> None:
        if self._own_client:
            await self.client.aclose()

    async def run(self, call: TargetCall) -> TargetOutput:
        try:
            response = await self.client.post(
                self.url, json=call.request_body(), headers=self.headers
            )
        except httpx.HTTPError as exc:
            raise TargetError(f"POST {self.url} failed: {type(exc).__name__}: {exc}") from exc
        body = response.content
        if response.status_code != 200:
            preview = body[:BODY_PREVIEW].decode("utf-8", "replace")
            raise TargetError(f"POST {self.url} answered {response.status_code}: {preview}")
        ctype = response.headers.get("content-type", "")
        try:
            if "ndjson" in ctype or "jsonl" in ctype:
                items = [orjson.loads(line) for line in body.splitlines() if line.strip()]
                call.received.extend(items)
                return TargetOutput(items)
            doc = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise TargetError(
                f"POST {self.url}: response is not JSON: {exc}", kind="signals"
            ) from exc
        if isinstance(doc, list):
            call.received.extend(doc)
            return TargetOutput(doc)
        if isinstance(doc, dict) and isinstance(doc.get("signals"), list):
            call.received.extend(doc["signals"])
            return TargetOutput(doc["signals"], doc.get("output"))
        raise TargetError(
            f'POST {self.url}: expected a list of signals or {{"signals": [...]}}, got '
            f"{type(doc).__name__}",
            kind="signals",
        )
