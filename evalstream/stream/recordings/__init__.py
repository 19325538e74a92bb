"""Recorded traffic: `evalstream record` (a topic into a file), `replay` (back into a topic,
the embedded runtime or a check) and live replay of recorded episodes against a candidate."""
