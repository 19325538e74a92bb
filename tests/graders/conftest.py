"""Re-exports the `messages_api` fixture (a started local Messages API server)."""

from tests.support.messages_api import messages_api

__all__ = ["messages_api"]
