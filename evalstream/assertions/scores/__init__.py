"""Scoring a closed episode: the five dimensions, safety detectors and gates, baselines, the
scoring stage and scoring runs."""
