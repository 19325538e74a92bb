"""The eval-harness report as JUnit XML, for CI systems that show test results.

One `<testsuite>` per suite run with one `<testcase>` per item (classname `eval_type.category`,
name the item key): `fail` is a `<failure>`, `error` an `<error>`, `skipped` and `pending` (a
human item awaiting ratings) are `<skipped>` with the reason, never a pass. When the run had
thresholds, a second `<testsuite name="thresholds">` has one testcase per threshold; a missed
threshold is a `<failure>` when the gate blocks, a warning in `<system-out>` otherwise.
Rendered from the report mapping alone, so a saved JSON result renders the same XML.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import Any

JSON = Any


def _suite(parent: ET.Element, name: str, counts: Mapping[str, int]) -> ET.Element:
    return ET.SubElement(
        parent, "testsuite", {"name": name, **{k: str(v) for k, v in counts.items()}}
    )


def _items_suite(root: ET.Element, r: Mapping[str, JSON]) -> None:
    items = r.get("items", [])
    counts = {
        "tests": len(items),
        "failures": sum(1 for i in items if i["status"] == "fail"),
        "errors": sum(1 for i in items if i["status"] == "error"),
        "skipped": sum(1 for i in items if i["status"] in ("skipped", "pending")),
    }
    suite = _suite(root, r["metadata"]["suite_name"], counts)
    duration = r["metadata"].get("duration_seconds")
    if duration is not None:
        suite.set("time", f"{duration:.3f}")
    for item in items:
        case = ET.SubElement(
            suite,
            "testcase",
            {"classname": f"{item['eval_type']}.{item['category']}", "name": item["eval_id"]},
        )
        status, reason = item["status"], item.get("reason", "")
        if status == "fail":
            ET.SubElement(case, "failure", {"message": reason, "type": "fail"}).text = reason
        elif status == "error":
            ET.SubElement(case, "error", {"message": reason, "type": "error"}).text = reason
        elif status == "pending":
            ET.SubElement(case, "skipped", {"message": f"pending: {reason}"})
        elif status == "skipped":
            ET.SubElement(case, "skipped", {"message": reason})
        if item.get("attempts", 0) > 1:
            ET.SubElement(
                case, "system-out"
            ).text = f"{item['passed_attempts']} of {item['attempts']} attempts passed"


def _gate_suite(root: ET.Element, gate: Mapping[str, JSON]) -> None:
    rows = gate["rows"]
    blocking = gate["on_failure"] == "block"
    missed = sum(1 for row in rows if not row["passed"])
    suite = _suite(
        root,
        "thresholds",
        {"tests": len(rows), "failures": missed if blocking else 0, "errors": 0, "skipped": 0},
    )
    for row in rows:
        case = ET.SubElement(suite, "testcase", {"classname": "thresholds", "name": row["metric"]})
        if row["passed"]:
            continue
        value = "undefined" if row["value"] is None else f"{row['value']:.3f}"
        message = f"{row['metric']} {value} is below the minimum {row['threshold']:g}"
        if row.get("note"):
            message += f" ({row['note']})"
        if blocking:
            ET.SubElement(case, "failure", {"message": message, "type": "threshold"}).text = message
        else:
            ET.SubElement(case, "system-out").text = f"warning: {message}"


def render_junit(report: Mapping[str, JSON]) -> str:
    r = report["eval_report"]
    root = ET.Element("testsuites", {"name": r["metadata"]["suite_name"]})
    _items_suite(root, r)
    if r.get("gate"):
        _gate_suite(root, r["gate"])
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"
