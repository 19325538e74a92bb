"""Why the gateway refuses a request: one exception with the status, a stable code and a body.

    InputError (evalstream.assertions.errors)
    └── Rejected                 4xx: the client's request is refused; nothing was published
    EvalstreamError
    └── Unavailable              503: the data could not be secured (broker down, buffer full)

Every rejection has the body `{"error": {"code", "message", ...}}`; `code` is stable and is
the `reason` label of the rejection metric.
"""

from __future__ import annotations

from typing import Any

from evalstream.assertions.errors import EvalstreamError, InputError

JSON = Any


class Rejected(InputError):  # noqa: N818 - reads as "the request was Rejected"
    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        limit: int | None = None,
        details: list[dict[str, JSON]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.limit = limit
        self.details = details
        self.headers = headers or {}

    def body(self) -> dict[str, JSON]:
        error: dict[str, JSON] = {"code": self.code, "message": self.message}
        if self.limit is not None:
            error["limit"] = self.limit
        if self.details:
            error["details"] = self.details
        return {"error": error}


class Unavailable(EvalstreamError):  # noqa: N818 - an HTTP 503 Service Unavailable
    """The broker did not acknowledge in time, is unreachable, or the buffer is full."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
