"""The eval-harness eval files, grading and reports (see the modules)."""
