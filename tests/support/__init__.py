"""Reusable test support: local servers that speak real wire protocols on 127.0.0.1.

`tests.support.messages_api` serves the Anthropic Messages API (JSON and SSE streaming) with
programmable replies and a record of every request; see its module docstring.
"""
