"""JUnit XML for CI systems: one testsuite per dataset run (per variant in a matrix), one
testcase per case; a comparison is one testsuite whose cases fail on blocking regressions."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from evalstream.assertions.evalruns.compare import Comparison
from evalstream.assertions.evalruns.matrix import MatrixResult
from evalstream.assertions.evalruns.models import CaseResult, DatasetResult


def _case_text(c: CaseResult) -> str:
    lines = []
    for s in c.samples:
        lines.append(
            f"sample {s.index}: {s.status} ({s.attempts} attempt(s), {s.duration_ms:.1f} ms)"
        )
        if s.error:
            lines.append(f"  {s.error_kind}: {s.error}")
        lines.extend(f"  {a.verdict} {a.type}: {a.message}" for a in s.assertions)
    return "\n".join(lines)


def _suite_element(parent: ET.Element, r: DatasetResult, name: str) -> ET.Element:
    suite = ET.SubElement(
        parent,
        "testsuite",
        name=name,
        tests=str(r.total_cases),
        failures=str(r.failed_cases),
        errors=str(r.error_cases),
        skipped=str(r.skipped_cases),
        time=f"{r.duration_ms / 1000:.3f}",
        timestamp=r.started_at or "",
    )
    for c in r.cases:
        tc = ET.SubElement(
            suite, "testcase", name=c.case_id, classname=name, time=f"{c.duration_ms / 1000:.3f}"
        )
        sample = c.representative()
        if c.status == "skipped":
            ET.SubElement(tc, "skipped", message=c.skip_reason or "skipped")
        elif c.status == "failed" and sample is not None:
            failed = sample.failed_assertions()
            message = "; ".join(f"{a.type}: {a.message}" for a in failed) or "failed"
            ET.SubElement(tc, "failure", message=message, type="assertion").text = _case_text(c)
        elif c.status == "error":
            ET.SubElement(
                tc, "error", message=c.error_message() or "error", type="error"
            ).text = _case_text(c)
        if c.samples:
            ET.SubElement(tc, "system-out").text = _case_text(c)
    return suite


def _dump(root: ET.Element) -> str:
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def dataset_junit(r: DatasetResult) -> str:
    root = ET.Element("testsuites", name=r.name)
    _suite_element(root, r, r.name if not r.variant_id else f"{r.name} [{r.variant_id}]")
    return _dump(root)


def matrix_junit(m: MatrixResult) -> str:
    root = ET.Element("testsuites", name=m.name)
    for v in m.variants:
        _suite_element(root, v.result, f"{m.name} [{v.variant_id}]")
    for vid, c in m.comparisons.items():
        _comparison_suite(root, c, f"{m.name} [{vid} vs {m.baseline_variant}]")
    return _dump(root)


def _comparison_suite(parent: ET.Element, c: Comparison, name: str) -> None:
    blocking = {
        r.case_id: r
        for r in c.regressions
        if r.severity == "critical" or c.summary.fail_on == "warning"
    }
    compared = [
        *c.unchanged,
        *sorted(
            {r.case_id for r in c.regressions}
            | {i.case_id for i in c.improvements}
            | {i.case_id for i in c.inconclusive}
        ),
    ]
    compared = list(dict.fromkeys(compared))
    suite = ET.SubElement(
        parent,
        "testsuite",
        name=name,
        tests=str(len(compared) + 1),
        failures=str(len(blocking) + int(c.summary.should_block)),
        errors="0",
        skipped="0",
    )
    gate = ET.SubElement(suite, "testcase", name="gate", classname=name)
    if c.summary.should_block:
        ET.SubElement(gate, "failure", message=c.summary.block_reason or "blocked", type="gate")
    for cid in compared:
        tc = ET.SubElement(suite, "testcase", name=cid, classname=name)
        notes = [
            f"{r.severity} {r.type}: {r.description}" for r in c.regressions if r.case_id == cid
        ]
        notes += [
            f"improvement {i.type}: {i.description}" for i in c.improvements if i.case_id == cid
        ]
        if cid in blocking:
            r = blocking[cid]
            ET.SubElement(tc, "failure", message=r.description, type=r.type).text = "\n".join(notes)
        elif notes:
            ET.SubElement(tc, "system-out").text = "\n".join(notes)


def comparison_junit(c: Comparison) -> str:
    root = ET.Element("testsuites", name=f"compare {c.candidate.name}")
    bname = c.baseline.variant_id or c.baseline.run_id
    kname = c.candidate.variant_id or c.candidate.run_id
    _comparison_suite(root, c, f"{c.candidate.name} [{kname} vs {bname}]")
    return _dump(root)
