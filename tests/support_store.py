"""A local episode store implementing the episode store's API, for tests (FastAPI + uvicorn).

    with EpisodeStoreServer() as store:
        store.add(episode)            # as stored: totals are computed like the real store
        store.put_raw(obj)            # stored exactly as given (bad input for tests)
        store.url                     # http://127.0.0.1:<port>

Endpoints: POST/GET /v1/episodes (filters agent_id, status, since, until, model, provider,
tool, limit 1-500 default 50, offset; newest first), GET /v1/episodes/{id},
GET /v1/episodes/{id}/replay, GET /v1/health. `list_without_steps` makes the list endpoint
answer summaries without steps (clients must then fetch each episode); `delay_s` slows
every answer down; `fail_with` makes every answer that HTTP status; `fail_page[offset] = n`
makes the next n list requests at that offset answer `page_failure` (503 with Retry-After 0).
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from datetime import datetime
from types import TracebackType
from typing import Any

import uvicorn
from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.responses import JSONResponse, Response

from tests.support.ports import free_port as _free_port

JSON = Any


def _parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def with_totals(episode: dict[str, JSON]) -> dict[str, JSON]:
    """The derived fields the store computes from the steps."""
    steps = episode.get("steps") or []
    tools: list[str] = []
    for step in steps:
        name = step.get("tool_name")
        if name and name not in tools:
            tools.append(name)
    return {
        "episode_id": episode.get("episode_id") or str(uuid.uuid4()),
        "status": "running",
        "metadata": {},
        "ended_at": None,
        **episode,
        "tools_used": tools,
        "total_tokens": sum(s.get("tokens") or 0 for s in steps),
        "total_cost_usd": round(sum(s.get("cost_usd") or 0.0 for s in steps), 12),
        "total_duration_ms": sum(s.get("duration_ms") or 0 for s in steps),
        "step_count": len(steps),
    }


class EpisodeStoreServer:
    def __init__(self) -> None:
        self.episodes: dict[str, dict[str, JSON]] = {}
        self.requests: list[str] = []  # path?query of each request
        self.list_without_steps = False
        self.delay_s = 0.0
        self.fail_with: int | None = None
        self.fail_page: dict[int, int] = {}
        self.page_failure = (503, {"Retry-After": "0"})
        self._newest_first: list[dict[str, JSON]] | None = None  # sorted once for big stores
        self.app = self._build()
        self.port = _free_port()
        config = uvicorn.Config(
            self.app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def add(self, episode: dict[str, JSON]) -> dict[str, JSON]:
        stored = with_totals(episode)
        self.episodes[stored["episode_id"]] = stored
        self._newest_first = None
        return stored

    def put_raw(self, obj: dict[str, JSON]) -> None:
        self.episodes[str(obj.get("episode_id"))] = obj
        self._newest_first = None

    def newest_first(self) -> list[dict[str, JSON]]:
        if self._newest_first is None or len(self._newest_first) != len(self.episodes):
            self._newest_first = sorted(
                self.episodes.values(), key=lambda e: str(e.get("started_at") or ""), reverse=True
            )
        return self._newest_first

    def _build(self) -> FastAPI:
        app = FastAPI()
        store = self

        @app.middleware("http")
        async def faults(request: Request, call_next: Any) -> Response:
            store.requests.append(
                request.url.path + (f"?{request.url.query}" if request.url.query else "")
            )
            if store.delay_s:
                await asyncio.sleep(store.delay_s)
            if store.fail_with is not None:
                return JSONResponse({"detail": "injected failure"}, status_code=store.fail_with)
            if request.url.path == "/v1/episodes" and request.method == "GET":
                offset = int(request.query_params.get("offset", "0"))
                if store.fail_page.get(offset, 0) > 0:
                    store.fail_page[offset] -= 1
                    status, headers = store.page_failure
                    return JSONResponse(
                        {"detail": "injected page failure"}, status_code=status, headers=headers
                    )
            response: Response = await call_next(request)
            return response

        @app.get("/v1/health")
        async def health() -> dict[str, JSON]:
            return {
                "status": "ok",
                "service": "episode-store",
                "version": "0.3.0",
                "episodes_stored": len(store.episodes),
            }

        @app.post("/v1/episodes", status_code=201)
        async def create(body: dict[str, JSON]) -> dict[str, JSON]:
            if not body.get("agent_id"):
                raise HTTPException(422, "agent_id is required")
            return store.add(body)

        @app.get("/v1/episodes")
        async def list_episodes(
            *,
            agent_id: str | None = None,
            status: str | None = None,
            since: str | None = None,
            until: str | None = None,
            model: str | None = None,
            provider: str | None = None,
            tool: str | None = None,
            limit: int = Query(50, ge=1, le=500),
            offset: int = Query(0, ge=0),
        ) -> list[dict[str, JSON]]:
            found = []
            for ep in store.newest_first():
                steps = ep.get("steps") or []
                started = ep.get("started_at")
                if agent_id is not None and ep.get("agent_id") != agent_id:
                    continue
                if status is not None and ep.get("status") != status:
                    continue
                if since is not None and (not started or _parse_time(started) < _parse_time(since)):
                    continue
                if until is not None and (not started or _parse_time(started) > _parse_time(until)):
                    continue
                if model is not None and not any(s.get("model") == model for s in steps):
                    continue
                if provider is not None and not any(s.get("provider") == provider for s in steps):
                    continue
                if tool is not None and not any(s.get("tool_name") == tool for s in steps):
                    continue
                found.append(ep)
            page = found[offset : offset + limit]
            if store.list_without_steps:
                return [{k: v for k, v in ep.items() if k != "steps"} for ep in page]
            return page

        @app.get("/v1/episodes/{episode_id}")
        async def get_episode(episode_id: str) -> dict[str, JSON]:
            if episode_id not in store.episodes:
                raise HTTPException(404, f"episode {episode_id} not found")
            return store.episodes[episode_id]

        @app.get("/v1/episodes/{episode_id}/replay")
        async def replay(episode_id: str) -> dict[str, JSON]:
            ep = store.episodes.get(episode_id)
            if ep is None:
                raise HTTPException(404, f"episode {episode_id} not found")
            keys = (
                "step_type",
                "tool_name",
                "model",
                "provider",
                "input_summary",
                "output_summary",
                "tokens",
                "cost_usd",
                "duration_ms",
                "metadata",
            )
            return {
                "episode_id": episode_id,
                "agent_id": ep.get("agent_id"),
                "original_status": ep.get("status"),
                "replay_steps": [
                    {"replay_index": i, **{k: s.get(k) for k in keys}}
                    for i, s in enumerate(ep.get("steps") or [])
                ],
                "total_tokens": ep.get("total_tokens"),
                "total_cost_usd": ep.get("total_cost_usd"),
                "tools_used": ep.get("tools_used"),
            }

        return app

    def __enter__(self) -> EpisodeStoreServer:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the test episode store did not start")
            time.sleep(0.01)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
