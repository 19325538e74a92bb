"""The skill-eval skill-eval file schemas (see `evalstream.assertions.skill_evals.models`)."""
