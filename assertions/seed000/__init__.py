"""Seed 000's eval files, grading and reports (see the modules)."""
