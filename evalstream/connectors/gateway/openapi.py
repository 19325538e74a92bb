"""OpenAPI descriptions of the gateway's request and response bodies.

The handlers read raw bodies (NDJSON, protobuf, gzip, size limits before parsing), so the
schemas are declared here rather than derived from pydantic parameters.
"""

from __future__ import annotations

from typing import Any

JSON = Any

SIGNAL = {
    "type": "object",
    "description": "A signal (DESIGN §2). `episode_id` may come from X-Evalstream-Episode.",
    "required": ["name", "timestamp"],
    "properties": {
        "id": {"type": "string", "minLength": 1},
        "episode_id": {"type": "string", "minLength": 1},
        "name": {"type": "string", "minLength": 1, "examples": ["tool:call"]},
        "timestamp": {
            "oneOf": [{"type": "string", "format": "date-time"}, {"type": "number"}],
            "description": "RFC 3339 or epoch milliseconds.",
        },
        "seq": {"type": "integer"},
        "source": {
            "type": "object",
            "properties": {
                "agent": {"type": "string"},
                "provider": {"type": "string"},
                "parent": {"type": "string"},
            },
        },
        "payload": {},
        "attrs": {"type": "object", "description": "`tenant` is always set by the server."},
    },
}

LLM_CALL = {
    "type": "object",
    "description": "A native LLM-call record, or the AIR record (run_id, tokens, ...).",
    "oneOf": [
        {
            "title": "native",
            "type": "object",
            "required": ["id", "timestamp"],
            "properties": {
                "id": {"type": "string", "minLength": 1},
                "episode_id": {"type": "string", "minLength": 1},
                "timestamp": {
                    "oneOf": [{"type": "string", "format": "date-time"}, {"type": "number"}]
                },
                "durationMs": {"type": "number", "minimum": 0},
                "model": {"type": "string"},
                "provider": {"type": "string"},
                "agent": {"type": "string"},
                "input": {},
                "output": {
                    "type": "object",
                    "properties": {
                        "content": {},
                        "toolCalls": {"type": "array"},
                        "usage": {"type": "object"},
                    },
                },
                "costUsd": {"type": "number", "minimum": 0},
                "stopReason": {"type": "string"},
                "status": {"enum": ["success", "error"]},
                "error": {},
                "attrs": {"type": "object"},
            },
        },
        {
            "title": "AIR",
            "type": "object",
            "required": ["run_id", "tokens", "timestamp"],
            "properties": {
                "version": {"type": "string"},
                "run_id": {"type": "string", "minLength": 1},
                "trace_id": {"type": "string"},
                "episode_id": {"type": "string", "minLength": 1},
                "timestamp": {"type": "string", "format": "date-time"},
                "model": {"type": "string"},
                "provider": {"type": "string"},
                "endpoint": {"type": "string"},
                "tokens": {
                    "type": "object",
                    "properties": {
                        "prompt": {"type": "integer", "minimum": 0},
                        "completion": {"type": "integer", "minimum": 0},
                        "total": {"type": "integer", "minimum": 0},
                    },
                },
                "duration_ms": {"type": "number", "minimum": 0},
                "status": {"enum": ["success", "error"]},
                "error": {},
            },
        },
    ],
}

STORE_EPISODE = {
    "type": "object",
    "description": "An episode in the episode-store shape.",
    "required": ["agent_id", "steps"],
    "properties": {
        "episode_id": {"type": "string"},
        "agent_id": {"type": "string", "minLength": 1},
        "status": {"enum": ["running", "success", "failure", "timeout", "killed"]},
        "steps": {"type": "array", "items": {"type": "object"}},
        "started_at": {"type": "string", "format": "date-time"},
        "ended_at": {"type": ["string", "null"], "format": "date-time"},
        "metadata": {"type": "object"},
    },
}

LITELLM_PAYLOAD = {
    "type": "object",
    "description": "LiteLLM's StandardLoggingPayload (generic_api callback).",
    "required": ["id", "startTime"],
    "properties": {
        "id": {"type": "string", "minLength": 1},
        "trace_id": {"type": "string"},
        "call_type": {"type": "string"},
        "status": {"enum": ["success", "failure"]},
        "model": {"type": "string"},
        "custom_llm_provider": {"type": ["string", "null"]},
        "startTime": {"type": "number"},
        "endTime": {"type": "number"},
        "prompt_tokens": {"type": "integer", "minimum": 0},
        "completion_tokens": {"type": "integer", "minimum": 0},
        "total_tokens": {"type": "integer", "minimum": 0},
        "response_cost": {"type": "number", "minimum": 0},
        "messages": {},
        "response": {},
        "error_str": {"type": ["string", "null"]},
        "metadata": {"type": "object"},
    },
}

ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "limit": {"type": "integer"},
                "details": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "index": {"type": "integer"},
                            "reason": {"type": "string"},
                            "message": {"type": "string"},
                        },
                    },
                },
            },
        }
    },
}

ACCEPTED = {
    "type": "object",
    "required": ["accepted", "episode_ids"],
    "properties": {
        "accepted": {"type": "integer", "description": "Records acknowledged by the broker."},
        "episode_ids": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Episode ids as stored (tenant-scoped), at most 100.",
        },
    },
}


def _error(description: str) -> dict[str, JSON]:
    return {"description": description, "content": {"application/json": {"schema": ERROR}}}


def error_responses(*statuses: int) -> dict[int | str, dict[str, JSON]]:
    texts = {
        400: "Malformed body (invalid JSON, protobuf or encoding).",
        401: "Missing or unknown token.",
        413: "Body too large, or too many records (`body_too_large`, `too_many_signals`).",
        415: "Unsupported content type or encoding.",
        422: "Invalid records, nesting too deep or a string too long.",
        503: "Not secured: broker unreachable, slow or buffer full. Retry after Retry-After.",
    }
    return {s: _error(texts[s]) for s in statuses}


INGEST_ERRORS = (400, 401, 413, 415, 422, 503)


def json_or_ndjson(item: dict[str, JSON]) -> dict[str, JSON]:
    """A request body of one item, an array of items, or NDJSON lines."""
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"oneOf": [item, {"type": "array", "items": item}]}},
                "application/x-ndjson": {
                    "schema": {"type": "string", "description": "One JSON record per line."}
                },
            },
        }
    }


def accepted_response() -> dict[int | str, dict[str, JSON]]:
    return {
        202: {
            "description": "Every record was acknowledged by the broker.",
            "content": {"application/json": {"schema": ACCEPTED}},
        },
        **error_responses(*INGEST_ERRORS),
    }


OTLP_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/x-protobuf": {
                "schema": {"type": "string", "format": "binary"},
                "description": "ExportTraceServiceRequest (protobuf). gzip allowed.",
            },
            "application/json": {
                "schema": {
                    "type": "object",
                    "properties": {"resourceSpans": {"type": "array", "items": {"type": "object"}}},
                },
            },
        },
    }
}

MESSAGES_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "description": "An Anthropic Messages API request, forwarded unchanged.",
                    "required": ["model", "messages", "max_tokens"],
                    "properties": {
                        "model": {"type": "string"},
                        "messages": {"type": "array", "items": {"type": "object"}},
                        "max_tokens": {"type": "integer"},
                        "stream": {"type": "boolean"},
                    },
                }
            }
        },
    }
}
