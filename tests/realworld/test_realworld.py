"""The real-world corpus (tests/realworld/cases): well-formed cases, the static ratchet, a runtime sample.

The static result of every case (is a finding on its `# ROOT` line, and every finding's code and
line) must equal tests/realworld/baseline.json: a regression fails, and so does an improvement
until the baseline is regenerated with ``python benchmarks/realworld.py --update-baseline``.
The full runtime pass is ``python benchmarks/realworld.py --runtime``.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

import realworld_cases
from check_each import check_each

REPO = Path(__file__).resolve().parents[2]
rw = realworld_cases.bench()  # benchmarks/realworld.py

CASES = realworld_cases.load_cases()  # once per run under xdist (tests/realworld_cases.py)
BUGS = [c for c in CASES if c.header.get("kind") == "bug"]
LOOKALIKES = [c for c in CASES if c.header.get("kind") == "lookalike"]
REGEN = "regenerate with: python benchmarks/realworld.py --update-baseline"

# Bugs whose first runtime finding is on the ROOT line today.
RUNTIME_SAMPLE = [
    "graph_breaks/soft_argmax_round_index.py",
    "inplace/sigmoid_output_index_assign.py",
    "autograd_api/adder_backward_no_return.py",
    "graph_lifetime/rnn_h_state_carried_over.py",
    "graph_lifetime/yolo_total_loss_keeps_graphs.py",
    "leaf/view_of_requires_grad_tensor.py",
    "grad_mode/faceboxes_global_grad_disabled.py",
]


_CODE = re.compile("gt[1-9][0-9][0-9]")  # f"gt{n}" for n in range(100, 1000)


def _id(case):
    return case.path.split("cases/", 1)[1]


# One item per family for the per-case tests, each checking every case of its family and naming
# each failing one (tests/check_each.py): 2 x 12 items instead of 2 x 1,800 (~3 ms each).
FAMILIES = sorted({c.family for c in CASES})


def _family(fam):
    return [(_id(c), c) for c in CASES if c.family == fam]


def test_corpus_is_not_empty():
    assert len(BUGS) >= 50 and len(LOOKALIKES) >= 25


@pytest.mark.parametrize("fam", FAMILIES)
def test_cases_are_well_formed(fam):
    assert check_each(_family(fam), _well_formed)


def _well_formed(case):
    header, title = rw.parse_header(case.text)
    assert title and not title.endswith(":"), "the docstring's first line is the bug's title"
    assert case.family in rw.FAMILIES
    assert header.get("source", "").startswith("https://")
    roots, symptoms = case.markers["# ROOT"], case.markers["# SYMPTOM"]
    name = os.path.basename(case.path)
    if header.get("kind") == "bug":
        # every key; `launch:` (e.g. `torchrun --nproc-per-node=2`) only when the case needs it
        assert set(rw.HEADER_KEYS) - {"launch"} <= set(header) <= set(rw.HEADER_KEYS)
        assert header["verified"]
        assert header["symptom"] in ("crash", "silent")
        assert len(roots) == 1, "a bug has exactly one # ROOT marker"
        assert not name.endswith("_ok.py")
        assert len(symptoms) <= 1 and (not symptoms or header["symptom"] == "crash")
    else:
        assert header.get("kind") == "lookalike"
        assert {"source", "kind"} <= set(header) <= {"source", "kind", "verified", "launch"}
        assert not roots and not symptoms, "a look-alike has no marker"
        assert name.endswith("_ok.py")
    lowered = case.text.lower()
    # no code GT100..GT999 anywhere (one search, not 900 substring tests: 5 s of the suite)
    assert "gradtrace" not in lowered and not _CODE.search(lowered)


@pytest.fixture(scope="module")
def baseline():
    path = Path(rw.BASELINE)
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


@pytest.mark.parametrize("fam", FAMILIES)
def test_static_results_equal_baseline(fam, baseline):
    assert check_each(((name, (case, baseline)) for name, case in _family(fam)), _static)


def _static(pair):
    """Every static assertion about one case, from one check of its text without the
    `# ROOT`/`# SYMPTOM` markers (each check is most of the corpus's time): a look-alike is
    silent, and the result equals the baseline, which `--update-baseline` writes from the text
    *with* its markers: one check asserts both that the checker is unchanged and that those
    comments change no finding (a second check of the marked text, sessions 49-55, cost a third
    of this test)."""
    case, baseline = pair
    stripped = rw.strip_markers(case.text)
    assert "# ROOT" not in stripped and "# SYMPTOM" not in stripped
    assert stripped.count("\n") == case.text.count("\n")  # the ROOT line keeps its number
    got = rw.static_result(case, stripped)
    if case.header.get("kind") == "lookalike":
        assert got["findings"] == [], f"{case.path}: a look-alike has findings {got['findings']}"
    assert case.path in baseline, f"{case.path} is not in the baseline; {REGEN}"
    want = baseline[case.path]
    if got["hit"] != want["hit"]:
        change = "now hits" if got["hit"] else "no longer hits"
        pytest.fail(f"{case.path}: the checker {change} the ROOT line (line {case.root}); "
                    f"findings {got['findings']}, baseline {want['findings']}; if this is an "
                    f"improvement, {REGEN} (if the baseline was just rewritten, the markers "
                    "changed a finding: a comment decided it)")
    assert got["findings"] == want["findings"], (
        f"findings changed; if intended, {REGEN} (if the baseline was just rewritten, the "
        "`# ROOT`/`# SYMPTOM` comments changed the findings: a comment decided one)")


def test_baseline_has_no_stale_entries(baseline):
    stale = sorted(set(baseline) - {c.path for c in CASES})
    assert not stale, f"baseline entries without a case: {stale}; {REGEN}"


def test_runtime_sample_names_the_root_line(tmp_path, forked):
    """The benchmark's batch driver on the sample, in a process forked from the rank server
    (tests/conftest.py ``forked``: torch and gradtrace imported once per test process)."""
    by_path = {c.path.split("cases/", 1)[1]: c for c in CASES}
    driver = tmp_path / "batch_driver.py"
    driver.write_text(rw.BATCH_DRIVER, encoding="utf-8")
    args = []
    for rel in RUNTIME_SAMPLE:
        args += [str(REPO / by_path[rel].path),
                 str(tmp_path / (rel.replace("/", "_") + ".json"))]
    out = tmp_path / "output.txt"
    codes = forked({"argv": [str(driver), *args], "cwd": str(tmp_path), "env": {},
                    "out": str(out), "world": 1, "timeout": 120, "script": True})
    stderr = out.read_text() if out.exists() else ""
    assert codes == [0] and "case runner failed" not in stderr, stderr
    assert f'File "{driver}"' not in stderr, stderr
    for rel in RUNTIME_SAMPLE:
        case = by_path[rel]
        findings = json.loads((tmp_path / (rel.replace("/", "_") + ".json")).read_text())["findings"]
        assert findings, f"{rel}: no runtime finding"
        first = findings[0]
        assert first["line"] == case.root, (rel, first)
        assert os.path.samefile(first["path"], REPO / case.path)
