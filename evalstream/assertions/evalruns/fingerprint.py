"""Which dataset a run ran: a fingerprint of its cases, so a comparison never mixes datasets.

The fingerprint is `sha256:` + the SHA-256 of the canonical JSON of the cases' ids and inputs,
sorted by id: renaming, adding or removing a case, or changing an input changes it; the
order of the cases, their names, tags and assertions do not (a changed assertion is what a
comparison is for).
"""

from __future__ import annotations

import hashlib
import json

from evalstream.assertions.suite_format.suites import Suite


def dataset_fingerprint(suite: Suite) -> str:
    cases = sorted(([c.id, c.input] for c in suite.cases), key=lambda pair: str(pair[0]))
    # default=str: YAML may load dates and times, which JSON has no type for.
    text = json.dumps(cases, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()
