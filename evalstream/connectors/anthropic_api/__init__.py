"""Clients of the Anthropic Messages API: the LLM judge (per question, with its budget, prompt
caching and retries), its Message Batches path and the batch state kept on disk, and the
live-replay client."""
