"""An async client of the episode-store (httpx; API in ../shared/notes/episode-store-formats.md).

    async with EpisodeStoreClient("http://localhost:8100") as store:
        health = await store.health()
        async for episode in store.iter_episodes(EpisodeQuery(agent_id="bot", limit=200)):
            ...                                  # full episodes, steps included

Endpoints used: `GET /v1/health`, `GET /v1/episodes` (filters `agent_id`, `model`, `status`,
`since`, `until`, `provider`, `tool`, `limit` 1-500, `offset`), `GET /v1/episodes/{id}`,
`GET /v1/episodes/{id}/replay`. A list answer may be a JSON array or an object with an
`episodes` array; listed episodes without `steps` are fetched one by one.

A list page that fails with a connection error, a timeout, HTTP 429 or 5xx is tried again,
paced by the shared `evalstream.connectors.retry_policy.BackoffPolicy` (`Retry-After` honoured,
capped); when its attempts are spent the error names the page's offset. `iter_episodes` tells an
optional `on_page(PageProgress)` after each page and each retry (the CLI's progress line).

Errors (one tree, rooted in `EpisodeStoreError`):

    EpisodeStoreError
    ├── StoreUnavailableError   cannot connect, or no answer within the timeout
    ├── StoreResponseError      an unexpected HTTP status or a body that is not the API's JSON
    │   └── EpisodeNotFoundError    404 for one episode
    └── StoreQueryError         a bad filter (also an InputError: the user's to fix)
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from evalstream.assertions.errors import EvalstreamError, InputError
from evalstream.connectors.retry_policy import Attempt, BackoffPolicy, Sleep, retry_after_s

# httpx is imported by the client that uses it: scoring episode files never loads it.
if TYPE_CHECKING:
    import httpx

JSON = Any
MAX_PAGE = 500  # the store's largest `limit`
STATUSES = ("running", "success", "failure", "timeout", "killed")
# A list page is tried up to 5 times over about 7 s (longer when the store asks, <= 30 s a pause).
PAGE_RETRY = BackoffPolicy(initial_s=0.5, max_s=30.0, max_attempts=5)


class EpisodeStoreError(EvalstreamError):
    """The episode store could not answer as asked."""


class StoreUnavailableError(EpisodeStoreError):
    """The store is unreachable or too slow."""


class StoreResponseError(EpisodeStoreError):
    """The store answered with an unexpected status or body."""

    def __init__(
        self, message: str, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after  # seconds the store asked to wait (Retry-After)

    @property
    def retryable(self) -> bool:
        return self.status is not None and (self.status == 429 or self.status >= 500)


class EpisodeNotFoundError(StoreResponseError):
    """No episode with that id."""


class StoreQueryError(EpisodeStoreError, InputError):
    """A filter the store cannot take (a limit out of range, an unknown status)."""


def _iso(value: datetime | str | None, name: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise StoreQueryError(
            f"`{name}` {value!r} is not an ISO 8601 time (e.g. 2026-01-01T00:00:00Z)"
        ) from exc
    return value


@dataclass(frozen=True, slots=True)
class EpisodeQuery:
    """Filters of the list endpoint. `limit` None: every matching episode (paged)."""

    agent_id: str | None = None
    model: str | None = None
    status: str | None = None
    since: datetime | str | None = None
    until: datetime | str | None = None
    provider: str | None = None
    tool: str | None = None
    limit: int | None = 50

    def __post_init__(self) -> None:
        if self.limit is not None and (
            isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit < 1
        ):
            raise StoreQueryError(f"`limit` must be an integer >= 1, got {self.limit!r}")
        if self.status is not None and self.status not in STATUSES:
            raise StoreQueryError(f"unknown status {self.status!r}; valid: {', '.join(STATUSES)}")
        _iso(self.since, "since")
        _iso(self.until, "until")

    def params(self) -> dict[str, str]:
        """The query parameters, without limit and offset."""
        values = {
            "agent_id": self.agent_id,
            "model": self.model,
            "status": self.status,
            "since": _iso(self.since, "since"),
            "until": _iso(self.until, "until"),
            "provider": self.provider,
            "tool": self.tool,
        }
        return {k: v for k, v in values.items() if v is not None}

    def to_json(self) -> dict[str, JSON]:
        return {**self.params(), "limit": self.limit}

    def matches(self, episode: JSON) -> bool:
        """Whether an episode passes the filters as the store applies them (for episodes read
        from files; `limit` is the caller's): agent id and status equal, some step with the
        model, provider or tool, `started_at` within since/until. What cannot be judged (not
        an object, no or a malformed `started_at`, steps that are not a list) passes, so the
        codec reports it instead of it vanishing."""
        if not isinstance(episode, Mapping):
            return True
        if self.agent_id is not None and episode.get("agent_id") != self.agent_id:
            return False
        if self.status is not None and episode.get("status") != self.status:
            return False
        steps = episode.get("steps")
        if isinstance(steps, list):
            for key, wanted in (("model", self.model), ("provider", self.provider)):
                if wanted is not None and not any(
                    isinstance(st, Mapping) and st.get(key) == wanted for st in steps
                ):
                    return False
            if self.tool is not None and not any(
                isinstance(st, Mapping) and st.get("tool_name") == self.tool for st in steps
            ):
                return False
        started = _moment(episode.get("started_at"))
        if started is None:
            return True
        since, until = _moment(_iso(self.since, "since")), _moment(_iso(self.until, "until"))
        return not (
            (since is not None and started < since) or (until is not None and started > until)
        )


def _moment(value: JSON) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class PageProgress:
    """How far a paged read has come: episodes and pages read, retries so far, and the
    failure just retried (`retrying`: None after a page that was read)."""

    episodes: int
    pages: int
    retries: int
    offset: int
    retrying: str | None = None


@dataclass(frozen=True, slots=True)
class StoreHealth:
    status: str
    service: str | None
    version: str | None
    episodes_stored: int | None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class EpisodeStoreClient:
    """See the module docstring. `client` (with its own base URL) replaces the default one."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = 10.0,
        client: httpx.AsyncClient | None = None,
        page_retry: BackoffPolicy = PAGE_RETRY,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        import httpx  # noqa: PLC0415 - see the imports above

        try:
            url = httpx.URL(base_url)
        except (httpx.InvalidURL, TypeError) as exc:
            raise StoreQueryError(f"invalid store URL {base_url!r}: {exc}") from exc
        if url.scheme not in ("http", "https") or not url.host:
            raise StoreQueryError(
                f"store URL {base_url!r} must be absolute http(s), e.g. http://localhost:8100"
            )
        if not (timeout_s > 0 and math.isfinite(timeout_s)):
            raise StoreQueryError(f"timeout must be a number > 0, got {timeout_s!r}")
        self.base_url = base_url.rstrip("/")
        self._own = client is None
        self._client = client or httpx.AsyncClient(base_url=self.base_url, timeout=timeout_s)
        self.page_retry = page_retry
        self._sleep = sleep
        self._rng = rng or random.Random()
        self.retries = 0  # list pages tried again, over this client's life

    async def __aenter__(self) -> EpisodeStoreClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._own:
            await self._client.aclose()

    async def _get(self, path: str, params: Mapping[str, str] | None = None) -> JSON:
        import httpx  # noqa: PLC0415 - loaded by the constructor already

        where = f"{self.base_url}{path}"
        try:
            response = await self._client.get(path, params=params)
        except httpx.TimeoutException as exc:
            raise StoreUnavailableError(
                f"episode store {where}: no answer in time ({type(exc).__name__}); is it "
                "overloaded? Raise --timeout"
            ) from exc
        except httpx.TransportError as exc:
            raise StoreUnavailableError(
                f"cannot reach the episode store at {self.base_url} ({exc}); is it running? "
                "Check --store-url"
            ) from exc
        if response.status_code == 404:
            raise EpisodeNotFoundError(f"{where}: not found (404)", 404)
        if response.status_code != 200:
            raise StoreResponseError(
                f"{where}: HTTP {response.status_code}: {response.text[:300]}",
                response.status_code,
                retry_after_s(response.headers, time.time()),
            )
        try:
            return response.json()
        except ValueError as exc:
            raise StoreResponseError(f"{where}: the answer is not JSON: {exc}") from exc

    async def health(self) -> StoreHealth:
        obj = await self._get("/v1/health")
        if not isinstance(obj, Mapping) or not isinstance(obj.get("status"), str):
            raise StoreResponseError(f"{self.base_url}/v1/health: no `status` in {obj!r}")
        stored = obj.get("episodes_stored")
        return StoreHealth(
            status=obj["status"],
            service=obj.get("service"),
            version=None if obj.get("version") is None else str(obj.get("version")),
            episodes_stored=stored if isinstance(stored, int) else None,
        )

    async def list_page(
        self,
        query: EpisodeQuery,
        *,
        limit: int,
        offset: int = 0,
        on_retry: Callable[[str], None] | None = None,
    ) -> list[JSON]:
        """One page of the list endpoint (as the store returns it, steps or not), retried
        as the module docstring says; `on_retry(error)` is told before each pause."""
        if not 1 <= limit <= MAX_PAGE:
            raise StoreQueryError(f"a page `limit` must be within 1..{MAX_PAGE}, got {limit}")
        params = {**query.params(), "limit": str(limit), "offset": str(offset)}

        async def attempt() -> Attempt[JSON]:
            try:
                return Attempt(await self._get("/v1/episodes", params))
            except StoreUnavailableError as exc:
                return Attempt(exc, retryable=True)
            except StoreResponseError as exc:
                if not exc.retryable:
                    raise
                return Attempt(exc, retryable=True, retry_after_s=exc.retry_after)

        def count_retry(failed: Attempt[JSON], pause: float) -> None:
            self.retries += 1
            if on_retry is not None:
                on_retry(f"{failed.result}; again in {pause:.1f}s")

        last = await self.page_retry.run(
            attempt, rng=self._rng, sleep=self._sleep, on_retry=count_retry
        )
        obj = last.result
        if isinstance(obj, EpisodeStoreError):
            raise _page_failed(obj, offset, limit, self.page_retry.max_attempts) from obj
        items = obj.get("episodes") if isinstance(obj, Mapping) else obj
        if not isinstance(items, list):
            raise StoreResponseError(
                f"{self.base_url}/v1/episodes: expected a list of episodes, got "
                f"{type(items).__name__}"
            )
        return items

    async def iter_episodes(
        self,
        query: EpisodeQuery,
        *,
        page_size: int = 100,
        on_page: Callable[[PageProgress], None] | None = None,
    ) -> AsyncIterator[JSON]:
        """Every episode matching `query` (at most `query.limit`), full (with steps)."""
        remaining = query.limit
        offset = read = pages = 0
        retries_before = self.retries

        def retrying(error: str) -> None:
            if on_page is not None:
                retried = self.retries - retries_before
                on_page(PageProgress(read, pages, retried, offset, retrying=error))

        while remaining is None or remaining > 0:
            want = min(page_size, MAX_PAGE) if remaining is None else min(remaining, page_size)
            want = min(want, MAX_PAGE)
            page = await self.list_page(query, limit=want, offset=offset, on_retry=retrying)
            pages += 1
            read += len(page)
            if on_page is not None:
                on_page(PageProgress(read, pages, self.retries - retries_before, offset))
            for listed in page:
                if (
                    isinstance(listed, Mapping)
                    and "steps" not in listed
                    and listed.get("episode_id")
                ):
                    yield await self.get_episode(str(listed["episode_id"]))
                else:
                    yield listed
            offset += len(page)
            if remaining is not None:
                remaining -= len(page)
            if len(page) < want:
                return

    async def get_episode(self, episode_id: str) -> JSON:
        if not episode_id:
            raise StoreQueryError("an episode id must be non-empty")
        return await self._get(f"/v1/episodes/{quote(episode_id, safe='')}")

    async def replay(self, episode_id: str) -> JSON:
        """The replay view of one episode (`{episode_id, replay_steps[...], ...}`)."""
        if not episode_id:
            raise StoreQueryError("an episode id must be non-empty")
        return await self._get(f"/v1/episodes/{quote(episode_id, safe='')}/replay")


def _page_failed(
    last: EpisodeStoreError, offset: int, limit: int, attempts: int
) -> EpisodeStoreError:
    """The error of a list page whose attempts are spent: which page, why, and what to do."""
    message = (
        f"episode store: the list page at offset {offset} (limit {limit}) failed {attempts} "
        f"times; last: {last}. The store is down or overloaded: check it (`evalstream status`) "
        "and run again, or read less at once (--since, --limit)"
    )
    if isinstance(last, StoreResponseError):
        return StoreResponseError(message, last.status, last.retry_after)
    return StoreUnavailableError(message)
