"""The LLM judge, pure half: the question and answer protocol and the prompt."""
