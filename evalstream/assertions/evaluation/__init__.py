"""The incremental engine: facts, matchers, plans, episode assembly, verdicts, results and output
records, and the plain reference evaluator."""
