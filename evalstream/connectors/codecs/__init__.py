"""Foreign formats into signals: JSONL, LLM-call records, LiteLLM payloads, OTLP traces, episode-
store episodes."""
