"""The episode-store client against a local server implementing the episode store's API."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from evalstream.assertions.errors import InputError
from evalstream.connectors.episode_store import (
    EpisodeNotFoundError,
    EpisodeQuery,
    EpisodeStoreClient,
    PageProgress,
    StoreQueryError,
    StoreResponseError,
    StoreUnavailableError,
)
from evalstream.connectors.retry_policy import BackoffPolicy
from tests.scoring.episodes import T0, iso, make_episode
from tests.support.ports import free_port
from tests.support_store import EpisodeStoreServer, with_totals


@pytest.fixture(scope="module")
def store() -> Iterator[EpisodeStoreServer]:
    with EpisodeStoreServer() as server:
        yield server


@pytest.fixture
def filled(store: EpisodeStoreServer) -> EpisodeStoreServer:
    store.episodes.clear()
    store.requests.clear()
    store.list_without_steps = False
    store.delay_s = 0.0
    store.fail_with = None
    store.fail_page = {}
    for i in range(5):
        store.add(make_episode(f"bot-{i}", start=T0 + timedelta(minutes=i)))
    store.add(make_episode("other-0", agent="other-bot", model="claude-sonnet-4-5"))
    store.add(make_episode("bot-run", status="running"))
    return store


async def collect(
    client: EpisodeStoreClient, query: EpisodeQuery, page_size: int = 100
) -> list[str]:
    return [ep["episode_id"] async for ep in client.iter_episodes(query, page_size=page_size)]


@pytest.mark.asyncio
async def test_health(filled: EpisodeStoreServer) -> None:
    async with EpisodeStoreClient(filled.url) as client:
        health = await client.health()
    assert health.ok
    assert (health.service, health.version, health.episodes_stored) == ("episode-store", "0.3.0", 7)


@pytest.mark.asyncio
async def test_filters_reach_the_store(filled: EpisodeStoreServer) -> None:
    async with EpisodeStoreClient(filled.url) as client:
        by_agent = await collect(client, EpisodeQuery(agent_id="other-bot"))
        by_model = await collect(client, EpisodeQuery(model="claude-sonnet-4-5"))
        by_status = await collect(client, EpisodeQuery(agent_id="support-bot", status="running"))
        recent = await collect(
            client, EpisodeQuery(agent_id="support-bot", since=T0 + timedelta(minutes=3))
        )
    assert by_agent == by_model == ["other-0"]
    assert by_status == ["bot-run"]
    assert sorted(recent) == ["bot-3", "bot-4"]
    assert "/v1/episodes?agent_id=support-bot&since=2026-01-01T00%3A03%3A00Z&limit=50&offset=0" in (
        filled.requests
    )


@pytest.mark.asyncio
async def test_pages_until_the_limit_or_the_end(filled: EpisodeStoreServer) -> None:
    async with EpisodeStoreClient(filled.url) as client:
        everything = await collect(client, EpisodeQuery(limit=None), page_size=2)
        three = await collect(client, EpisodeQuery(limit=3), page_size=2)
    assert len(everything) == len(set(everything)) == 7
    assert len(three) == 3
    offsets = [r for r in filled.requests if r.startswith("/v1/episodes?")]
    assert offsets[:4] == [
        "/v1/episodes?limit=2&offset=0",
        "/v1/episodes?limit=2&offset=2",
        "/v1/episodes?limit=2&offset=4",
        "/v1/episodes?limit=2&offset=6",
    ]


@pytest.mark.asyncio
async def test_summaries_without_steps_are_fetched_in_full(filled: EpisodeStoreServer) -> None:
    filled.list_without_steps = True
    async with EpisodeStoreClient(filled.url) as client:
        episodes = [ep async for ep in client.iter_episodes(EpisodeQuery(agent_id="other-bot"))]
    assert [len(ep["steps"]) for ep in episodes] == [6]
    assert "/v1/episodes/other-0" in filled.requests


@pytest.mark.asyncio
async def test_fetch_and_replay(filled: EpisodeStoreServer) -> None:
    async with EpisodeStoreClient(filled.url) as client:
        episode = await client.get_episode("bot-1")
        replay = await client.replay("bot-1")
        with pytest.raises(EpisodeNotFoundError, match="not found") as missing:
            await client.get_episode("nope")
    assert episode["total_cost_usd"] == 0.02
    assert replay["original_status"] == "success"
    assert [s["step_type"] for s in replay["replay_steps"]][:2] == ["llm_call", "tool_call"]
    assert missing.value.status == 404


@pytest.mark.asyncio
async def test_a_store_that_is_down() -> None:
    port = free_port()  # nothing listens there
    async with EpisodeStoreClient(f"http://127.0.0.1:{port}") as client:
        with pytest.raises(
            StoreUnavailableError, match=r"cannot reach the episode store.*--store-url"
        ):
            await client.health()


@pytest.mark.asyncio
async def test_a_slow_store_times_out(filled: EpisodeStoreServer) -> None:
    filled.delay_s = 1.0
    async with EpisodeStoreClient(filled.url, timeout_s=0.1) as client:
        with pytest.raises(StoreUnavailableError, match="no answer in time"):
            await client.health()


@pytest.mark.asyncio
async def test_a_failing_store(filled: EpisodeStoreServer) -> None:
    filled.fail_with = 503
    quick = BackoffPolicy(initial_s=0.0, max_s=0.0, max_attempts=2)
    async with EpisodeStoreClient(filled.url, page_retry=quick) as client:
        with pytest.raises(StoreResponseError, match="HTTP 503") as failed:
            await collect(client, EpisodeQuery())
    assert failed.value.status == 503
    assert "offset 0" in str(failed.value)
    assert len(filled.requests) == 2  # one retry, then the error


@pytest.mark.asyncio
async def test_a_page_that_fails_once_is_retried_after_the_stores_pause(
    filled: EpisodeStoreServer,
) -> None:
    filled.fail_page = {2: 1}
    filled.page_failure = (503, {"Retry-After": "3"})
    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)

    seen: list[PageProgress] = []
    async with EpisodeStoreClient(filled.url, sleep=sleep) as client:
        ids = [
            ep["episode_id"]
            async for ep in client.iter_episodes(
                EpisodeQuery(limit=None), page_size=2, on_page=seen.append
            )
        ]
    assert len(ids) == len(set(ids)) == 7
    assert pauses == [3.0]  # the store's Retry-After, not the computed back-off
    assert client.retries == 1
    assert [p.offset for p in seen if p.retrying] == [2]
    assert "HTTP 503" in str(seen[1].retrying)
    assert (seen[-1].episodes, seen[-1].pages, seen[-1].retries) == (7, 4, 1)


@pytest.mark.asyncio
async def test_a_client_error_on_a_page_is_not_retried(filled: EpisodeStoreServer) -> None:
    filled.fail_page = {0: 1}
    filled.page_failure = (400, {})
    async with EpisodeStoreClient(filled.url) as client:
        with pytest.raises(StoreResponseError, match="HTTP 400"):
            await collect(client, EpisodeQuery())
    assert client.retries == 0


@pytest.mark.asyncio
async def test_a_store_of_100000_episodes_is_read_completely() -> None:
    base = with_totals(make_episode("base"))
    with EpisodeStoreServer() as big:
        for i in range(100_000):
            episode_id = f"ep-{i:06d}"
            started = iso(T0 + timedelta(seconds=i))
            big.episodes[episode_id] = {**base, "episode_id": episode_id, "started_at": started}
        big.fail_page = {50_000: 1}  # one page fails midway, and is read on the retry
        async with EpisodeStoreClient(big.url) as client:
            ids = [
                ep["episode_id"]
                async for ep in client.iter_episodes(EpisodeQuery(limit=None), page_size=500)
            ]
    assert len(ids) == 100_000
    assert ids[0] == "ep-099999"
    assert ids[-1] == "ep-000000"
    assert set(ids) == set(big.episodes)
    assert client.retries == 1
    # 200 full pages, the empty one that ends the read, and the retry
    assert sum("/v1/episodes?" in r for r in big.requests) == 202


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"limit": 0}, "`limit` must be an integer >= 1"),
        ({"status": "done"}, "unknown status 'done'; valid: running, success"),
        ({"since": "yesterday"}, "`since` 'yesterday' is not an ISO 8601 time"),
    ],
)
def test_bad_queries_are_input_errors(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(StoreQueryError, match=match) as info:
        EpisodeQuery(**kwargs)  # type: ignore[arg-type]  # deliberately wrong values
    assert isinstance(info.value, InputError)


@pytest.mark.asyncio
async def test_a_page_limit_over_the_store_maximum(filled: EpisodeStoreServer) -> None:
    async with EpisodeStoreClient(filled.url) as client:
        with pytest.raises(StoreQueryError, match=r"within 1\.\.500"):
            await client.list_page(EpisodeQuery(), limit=501)


def test_bad_store_urls() -> None:
    with pytest.raises(StoreQueryError, match="must be absolute http"):
        EpisodeStoreClient("localhost:8100")
    with pytest.raises(StoreQueryError, match="timeout must be a number > 0"):
        EpisodeStoreClient("http://localhost:8100", timeout_s=0)
