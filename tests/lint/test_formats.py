"""Output formats: SARIF 2.1.0 shape, GitHub commands, text with carets; 1-based at the edges."""
from __future__ import annotations

import json

from gradtrace.findings import Edit, Finding, Fix, Related
from gradtrace.formats import to_github, to_json, to_sarif, to_text

F = Finding(code="GT101", name="backward-on-python-number", message="msg, with: colon",
            path="pkg/a.py", line=3, column=4, end_line=3, end_column=10,
            related=(Related("pkg/a.py", 2, "became a float here", 0),),
            fix=Fix("Call backward on the tensor", "safe", (Edit(3, 4, 3, 10, "loss"),)))


def test_json_round_trip_and_one_based_columns():
    doc = json.loads(to_json([F]))
    d = doc["findings"][0]
    assert (d["column"], d["end_column"], d["related"][0]["column"]) == (5, 11, 1)
    assert Finding.from_dict(d) == F


def test_sarif_shape():
    doc = json.loads(to_sarif([F]))
    assert doc["version"] == "2.1.0"
    run = doc["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "gradtrace"
    rule_ids = [r["id"] for r in driver["rules"]]
    assert "GT101" in rule_ids and "GT000" in rule_ids
    rule = driver["rules"][rule_ids.index("GT101")]
    assert {"id", "name", "shortDescription", "fullDescription", "help"} <= set(rule)
    res = run["results"][0]
    assert res["ruleId"] == "GT101" and res["level"] == "error"
    assert res["ruleIndex"] == rule_ids.index("GT101")
    region = res["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"], region["endColumn"]) == (3, 5, 11)
    assert res["relatedLocations"][0]["physicalLocation"]["region"]["startLine"] == 2
    assert res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "pkg/a.py"


def test_github_escapes_properties():
    line = to_github([F]).strip()
    assert line == "::error file=pkg/a.py,line=3,col=5,title=GT101::GT101 msg, with: colon"
    g = Finding(code="GT101", name="n", message="a\nb", path="x,y:z.py", line=1)
    assert to_github([g]).strip() == "::error file=x%2Cy%3Az.py,line=1,col=1,title=GT101::GT101 a%0Ab"


def test_text_caret_related_and_help():
    text = to_text([F], {"pkg/a.py": "import torch\nx = 1\n    y.item().backward()\n"})
    lines = text.splitlines()
    assert lines[0] == "pkg/a.py:3:5: GT101 msg, with: colon"
    assert lines[2] == "3 |     y.item().backward()"
    assert lines[3] == "  |     ^^^^^^"
    assert lines[4] == "  --> pkg/a.py:2:1: became a float here"
    assert lines[5] == "  help: Call backward on the tensor"
    assert "\x1b[" not in text and "\x1b[" in to_text([F], {}, color=True)
