"""The skill-eval skill-eval file schemas (see `assertions.skill_evals.models`)."""
