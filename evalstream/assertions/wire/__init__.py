"""The signal and its wire decoding: the record, its limits, name patterns, LLM-call payloads and
their prices."""
