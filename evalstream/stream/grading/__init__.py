"""What the grading commands do: an eval-harness suite run and gated (`harness run`), human
review in the terminal (`review`) and the judge's calibration against it."""
