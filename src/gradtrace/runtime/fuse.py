"""One ranking for both faces: the static checker's findings on the code that ran, fused with
what the runtime saw. ``gradtrace run``, ``trace()``, the pytest plugin and ``%load_ext
gradtrace`` all rank through :func:`fuse`.

# NOTE [ranking]
Every user file that executed under the tracer (not the standard library, not site-packages,
not torch or gradtrace) is checked statically, once per file version (cached by path, size and
mtime). Then, most likely root cause first:

1. the diagnosis of the crash, if there was one;
2. the problems the runtime saw (errors before warnings, in the order the runtime found them,
   except that when the program did not crash, of two findings of one symptom family and one
   severity, the one a static finding confirms comes first: two cuts on the paths of the same
   parameters, the one both faces see);
3. static findings on code that ran (NOTE [code that ran] in :mod:`gradtrace.runtime.ran`: a
   function that executed, or a module-level line that is part of code that executed) that no
   runtime symptom confirmed (``source="static"``), minus those the run refutes.

A static finding *accounts for* a runtime finding when its rule can cause that symptom
(:data:`EXPLAINS`: a never-graded parameter by a cut, freeze or grad-mode finding; "backward
through the graph a second time" by a graph-lifetime finding; an empty optimizer list by a
freezing or registration finding...) and it sits on the runtime's line, on a line the runtime
named as part of the cause, or, when the runtime only knows the symptom's line (the layer call
inside ``forward``, the ``step()`` line, the class line), in the same file. The fused finding
keeps the static finding's code, message, line and fix, gets the runtime's evidence as a related
entry ("confirmed at run time: ...") and ``source="static+runtime"``, and takes the runtime
finding's place in the ranking. When the static finding sits on the line where the program
crashed (the symptom) and the runtime names an earlier line, the runtime's line leads and the
static finding is attached to it. So is a static finding on a line the runtime only named as
context when the runtime's own line is the exact operation (``_EXACT``: the in-place write, the
consumer of an undetached fake, the backward() that freed a shared graph...).
"""
from __future__ import annotations

import ast
import linecache
import logging
import os
import re
from dataclasses import replace
from types import CodeType
from typing import Any, Iterable

from gradtrace.env import strict
from gradtrace.findings import Finding, Related
from gradtrace.runtime.build import OUTPUT_UNUSED
from gradtrace.runtime.ran import (code_spans, is_user_file, library_prefixes,  # noqa: F401
                                   ran_codes)

LOG = logging.getLogger(__name__)

# symptom family -> the static rules that can cause it
EXPLAINS: dict[str, frozenset[str]] = {
    "graph-cut": frozenset({"GT101", "GT102", "GT103", "GT104", "GT105", "GT106", "GT107",
                            "GT108", "GT109", "GT110", "GT201", "GT202", "GT203", "GT204", "GT205",
                            "GT207", "GT407", "GT408", "GT431", "GT111", "GT208", "GT209",
                            "GT210", "GT112", "GT213", "GT214", "GT445", "GT113",
                            "GT215", "GT216", "GT230", "GT720", "GT220", "GT580",
                            "GT611"}),
    "not-optimized": frozenset({"GT401", "GT402", "GT403", "GT404", "GT406", "GT409", "GT410",
                                "GT420", "GT421", "GT435", "GT437", "GT438", "GT439", "GT440",
                                "GT109", "GT413", "GT442", "GT444", "GT445", "GT446",
                                "GT447", "GT214", "GT448", "GT215", "GT462"}),
    "freed-graph": frozenset({"GT505", "GT506", "GT507", "GT508", "GT509", "GT601", "GT521",
                              "GT570", "GT535"}),
    "empty-optimizer": frozenset({"GT401", "GT402", "GT403", "GT405", "GT407", "GT408",
                                  "GT420", "GT421", "GT431", "GT444"}),
    "accumulate": frozenset({"GT501", "GT502", "GT503", "GT517", "GT523", "GT721"}),
    "clip": frozenset({"GT504", "GT514"}),
    "graph-kept": frozenset({"GT505"}),
    "inplace-saved": frozenset({"GT601", "GT602", "GT603", "GT605", "GT521", "GT609"}),
    "inplace-leaf": frozenset({"GT302"}),
    "number": frozenset({"GT101", "GT102"}),
    "grad-none": frozenset({"GT301", "GT303", "GT305", "GT307", "GT403", "GT407", "GT408"}),
    "inference": frozenset({"GT204"}),
    "non-leaf-optimizer": frozenset({"GT305", "GT306", "GT403"}),
    "function-count": frozenset({"GT701"}),
    "unused-input": frozenset({"GT702", "GT706"}),
    "none-result": frozenset({"GT511"}),
    "non-scalar": frozenset({"GT510", "GT703", "GT715"}),
    "grad-shape": frozenset({"GT716"}),
    "ddp-unused": frozenset({"GT450", "GT451", "GT452", "GT459", "GT611"}),
    "ddp-unsynced": frozenset({"GT453", "GT454"}),
    "ddp-desync": frozenset({"GT455"}),
    "ddp-ready-twice": frozenset({"GT460"}),
    "non-finite": frozenset({"GT751", "GT752", "GT753", "GT754", "GT755", "GT756", "GT759",
                             "GT769"}),
    "optimizer-rebuilt": frozenset({"GT436"}),
    "schedule": frozenset({"GT515"}),
    "eval-mode": frozenset({"GT516", "GT551"}),
    "discard": frozenset({"GT512", "GT518", "GT522"}),
    "rejected-assignment": frozenset({"GT415", "GT416"}),
    "idle-step": frozenset({"GT707", "GT431", "GT441", "GT432", "GT530"}),
    "dropped-result": frozenset({"GT708"}),
    "clip-scaled": frozenset({"GT524"}),
    "schedule-unit": frozenset({"GT526"}),
    "inplace-caller": frozenset({"GT607"}),
    "view-inplace": frozenset({"GT606"}),
    "scaler-order": frozenset({"GT525"}),
    "checkpoint": frozenset({"GT205"}),
    "listed-twice": frozenset({"GT435"}),
    "dead-term": frozenset({"GT101", "GT102", "GT103", "GT104", "GT105", "GT107", "GT108",
                            "GT111", "GT201", "GT202", "GT216"}),
    "bce-input": frozenset({"GT760"}),
    "softmax-singleton": frozenset({"GT762"}),
    "frozen-stats": frozenset({"GT461", "GT443"}),
    "functional-dropout": frozenset({"GT548"}),
    "clip-other": frozenset({"GT549"}),
    "eval-in-train": frozenset({"GT550"}),
    "shared-layer": frozenset({"GT446"}),  # the list multiplied names the line that built it
    "needs-guard": frozenset({"GT718"}),  # a gradient computed under another input's flag
    "window-early": frozenset({"GT536"}),  # NOTE [window starts one pass early]
}
# runtime finding code -> the symptom families it reports
_FAMILY: dict[str, tuple[str, ...]] = {
    "GT800": ("graph-cut", "empty-optimizer"), "GT820": ("graph-cut", "grad-none"),
    "GT101": ("number", "graph-cut"), "GT102": ("graph-cut",),
    "GT104": ("graph-cut",), "GT105": ("graph-cut",), "GT107": ("graph-cut",),
    "GT108": ("graph-cut",), "GT201": ("graph-cut",), "GT202": ("graph-cut",),
    "GT203": ("graph-cut",), "GT204": ("inference",),
    "GT821": ("not-optimized",), "GT401": ("not-optimized", "empty-optimizer"),
    "GT402": ("not-optimized",), "GT407": ("graph-cut",), "GT404": ("not-optimized",), "GT410": ("not-optimized",),
    "GT803": ("freed-graph",), "GT506": ("freed-graph",), "GT507": ("freed-graph",),
    "GT508": ("freed-graph",), "GT509": ("freed-graph",), "GT809": ("empty-optimizer",),
    "GT405": ("empty-optimizer",), "GT823": ("accumulate",), "GT501": ("accumulate",),
    "GT824": ("clip",), "GT504": ("clip",), "GT826": ("graph-kept",), "GT505": ("graph-kept",),
    "GT804": ("inplace-saved",), "GT601": ("inplace-saved",), "GT602": ("inplace-saved",),
    "GT805": ("inplace-leaf",), "GT302": ("inplace-leaf",), "GT806": ("number",),
    "GT801": ("grad-none",), "GT301": ("grad-none",), "GT305": ("grad-none",),
    "GT307": ("grad-none",), "GT822": ("grad-none",), "GT808": ("inference",),
    "GT810": ("non-leaf-optimizer",), "GT306": ("non-leaf-optimizer",),
    "GT811": ("function-count",), "GT701": ("function-count",), "GT812": ("unused-input",),
    "GT702": ("unused-input",), "GT813": ("none-result",), "GT511": ("none-result",),
    "GT802": ("non-scalar",), "GT510": ("non-scalar",),
    "GT420": ("not-optimized", "empty-optimizer"), "GT421": ("not-optimized", "empty-optimizer"),
    "GT880": ("ddp-unused",), "GT881": ("ddp-unused",), "GT884": ("ddp-unsynced",),
    "GT882": ("ddp-ready-twice",), "GT883": ("ddp-desync",), "GT885": ("ddp-desync",), "GT455": ("ddp-desync",),
    "GT450": ("ddp-unused",), "GT451": ("ddp-unused",), "GT452": ("ddp-unused",),
    "GT453": ("ddp-unsynced",), "GT454": ("ddp-unsynced",), "GT887": ("ddp-unsynced",),
    "GT703": ("non-scalar",), "GT715": ("non-scalar",),
    "GT830": ("grad-shape",), "GT716": ("grad-shape",),
    "GT825": ("non-finite",), "GT851": ("non-finite",), "GT751": ("non-finite",),
    "GT752": ("non-finite",),
    "GT753": ("non-finite",), "GT754": ("non-finite",), "GT755": ("non-finite",),
    "GT503": ("accumulate",), "GT406": ("not-optimized",), "GT515": ("schedule",),
    "GT829": ("optimizer-rebuilt",), "GT436": ("optimizer-rebuilt",),
    "GT208": ("graph-cut",), "GT209": ("graph-cut",), "GT210": ("graph-cut",), "GT517": ("accumulate",),
    "GT605": ("inplace-saved",), "GT706": ("unused-input",),
    "GT516": ("eval-mode",), "GT827": ("discard",), "GT512": ("discard",),
    "GT816": ("rejected-assignment",), "GT840": ("idle-step",), "GT849": ("not-optimized",), "GT756": ("non-finite",), "GT521": ("freed-graph",),
    "GT708": ("dropped-result",), "GT524": ("clip-scaled",), "GT526": ("schedule-unit",),
    "GT848": ("inplace-caller",), "GT832": ("view-inplace",),
    "GT834": ("scaler-order",), "GT205": ("checkpoint",), "GT435": ("listed-twice",),
    "GT844": ("dead-term",), "GT838": ("bce-input",), "GT856": ("not-optimized",),
    "GT877": ("softmax-singleton",), "GT841": ("frozen-stats",),
    "GT875": ("functional-dropout",), "GT876": ("clip-other",), "GT874": ("eval-in-train",),
    "GT843": ("shared-layer",), "GT845": ("needs-guard",), "GT879": ("window-early",),
}
# Runtime findings whose line is the exact operation that caused the symptom (the detach, the
# in-place write...): a static finding elsewhere in the file is another bug, not this one.
_EXACT = frozenset({"GT101", "GT104", "GT105", "GT107", "GT108", "GT301", "GT302", "GT305",
                    "GT402", "GT504", "GT505", "GT511", "GT602", "GT702",
                    "GT804", "GT805", "GT826", "GT303", "GT304", "GT508", "GT509", "GT708",
                    "GT524", "GT526", "GT848"})
# Runtime findings that lead over a static finding on one of their context lines only (not one
# elsewhere in the file): GT601 names the use of a value computed before optimizer.step() (or
# the call handing it on: NOTE [stale value handed to a callee]) with the step as context, and
# a static GT601 on that step line is the same bug seen from the step.
_LEADS_CONTEXT = frozenset({"GT601"})
# Runtime findings about one optimizer's lines (GT827 names the step or zero_grad() of one
# optimizer, with its backward() as context): a static finding confirms it on those lines only,
# never a loop-order finding about another optimizer elsewhere in the file (a GAN's
# discriminator step; NOTE [step before backward] in runtime/trace/loop_order.py).
_LINES_ONLY = frozenset({"GT827"})
# Families specific enough that the only candidate in the files that ran explains the symptom
# even in another file (the model's file vs the training script).
# runtime code -> static rules whose object is never among what it names: GT820 lists registered
# parameters never graded, and GT403's moved copy is never a registered parameter (a move that
# returns the Parameter itself is harmless) (Graph-WaveNet, docs/triage/unseen14.md)
_NEVER_NAMED: dict[str, frozenset[str]] = {"GT820": frozenset({"GT403"})}
_SPECIFIC = frozenset({"freed-graph", "accumulate", "empty-optimizer", "not-optimized"})
# Families where the runtime sees which of two lines both faces name is the cause (the backward()
# that added into a stale .grad, not the step() that applied the sum): its line leads.
_RUNTIME_PICKS = frozenset({"accumulate"})
# Static rules whose symptom the runtime checks by itself (a crash, a parameter that never gets
# a gradient, gradients accumulating...): once the run got through a backward() (and, for the
# loop-order rules, two optimizer steps) on code that holds such a finding without showing the
# symptom, the run refutes the finding and it is left out. -> optimizer steps needed.
# (Not GT301: a rebound leaf is never *updated*, which the run does not check; its gradients
# still flow, so a run without a symptom proves nothing.)
_REFUTABLE: dict[str, int] = {
    **dict.fromkeys(("GT101", "GT102", "GT104", "GT105", "GT107", "GT108", "GT201", "GT203",
                     "GT204", "GT205", "GT302", "GT506", "GT507", "GT508", "GT509",
                     "GT510", "GT511", "GT601", "GT602", "GT603", "GT701", "GT702",
                     "GT715", "GT716"), 0),
    **dict.fromkeys(("GT401", "GT402", "GT404", "GT410", "GT504", "GT442"), 1),
    **dict.fromkeys(("GT501", "GT502", "GT503", "GT505"), 2),
}
# Runtime codes two mechanisms report for one bug (the parameters a reentrant checkpoint left
# without gradients and torch's warning at the checkpoint, on one line; torch's warning about a
# group listing a tensor twice and the static GT435 another finding confirmed, in one file):
# shown once.
_SEEN_TWICE = {"GT205": "line", "GT435": "file"}
CONFIRMED = "confirmed at run time "
# NOTE [crash in related]
# A static finding whose cause and symptom are on different lines (a param group added after
# the scheduler, GT533) names the line that will raise in a related entry worded
# "... raises here"; a general crash on that line is then its symptom, and its line leads.
RAISES_HERE = "raises here"
# NOTE [error it predicts]
# A static finding that quotes the error its bug raises (GT619: "raises `RuntimeError:
# unsupported operation: more than one element ...`") in the file of a general crash whose
# error is that one (the write into an expand() view fails in backward(), far from the write):
# the crash is its symptom, and its line leads (the first such finding of the file).
_PREDICTED = re.compile(r"raises `(?:\w+(?:Error|Exception): )?([^`]{24,})`")
STATIC_ALSO = "also found by reading the code: "

_CACHE: dict[str, tuple[Any, list[Finding]]] = {}
_SETTINGS: dict[str, Any] = {}


# -- static findings, cached per file ---------------------------------------------------------
def static_findings(path: str) -> list[Finding]:
    """The static checker's findings for one file (absolute path, or an IPython cell name),
    paths shown as the runtime shows them; cached per file version."""
    from gradtrace.runtime.build import display_path

    try:
        if path.startswith("<"):
            text = "".join(linecache.getlines(path))
            key: Any = hash(text)
        else:
            st = os.stat(path)
            key, text = (st.st_size, st.st_mtime_ns), None
    except OSError:
        return []
    hit = _CACHE.get(path)
    if hit is not None and hit[0] == key:
        return hit[1]
    found = [replace(f, path=display_path(f.path), related=tuple(
        replace(r, path=display_path(r.path)) for r in f.related))
        for f in _check(path, text) if f.code[2] != "0"]
    _CACHE[path] = (key, found)
    return found


def _check(path: str, text: str | None) -> list[Finding]:
    from gradtrace.lint import check_file, check_source
    from gradtrace.lint.registry import select_rules

    settings = _settings_for(os.path.dirname(path) if text is None else os.getcwd())
    if text is not None:
        return check_source(text, path, settings=settings) if "torch" in text else []
    rules = select_rules(settings.select, settings.ignore, settings.extend_select)
    return check_file(path, rules, settings).findings


def _settings_for(folder: str) -> Any:
    from gradtrace.lint.config import Settings, load_settings

    s = _SETTINGS.get(folder)
    if s is None:
        try:
            s = load_settings(folder)
        except Exception:  # a broken pyproject of the user's: the defaults
            s = Settings()
        _SETTINGS[folder] = s
    return s


# -- fusing ------------------------------------------------------------------------------------
def _abs(path: str) -> str:
    return path if path.startswith("<") else os.path.abspath(path)


def _families(f: Finding) -> tuple[str, ...]:
    return _FAMILY.get(f.code, ())


def _candidates(r: Finding, static: list[Finding], used: set[int],
                crash_line: tuple[str, int] | None) -> tuple[int, bool] | None:
    """(index of the static finding that accounts for ``r``, whether it leads), or None."""
    if r.code == GENERAL_CRASH:  # a static rule on the crashing line is its specific diagnosis
        at = (_abs(r.path), r.line)
        return next(((i, True) for i, s in enumerate(static) if i not in used and s.severity
                     != "info" and (_abs(s.path), s.line) == at), None) or next((
            (i, True) for i, s in enumerate(static) if i not in used and s.severity != "info"
            and any((_abs(x.path), x.line) == at and x.message.endswith(RAISES_HERE)
                    for x in s.related)), None) or next((  # NOTE [crash in related]
            (i, True) for i, s in enumerate(static) if i not in used and s.severity != "info"
            and _abs(s.path) == at[0] and _predicts(s, r)), None)  # NOTE [error it predicts]
    fams = _families(r)
    if not fams:
        return None
    allowed = frozenset().union(*(EXPLAINS[f] for f in fams)) - _NEVER_NAMED.get(r.code, set())
    r_path = _abs(r.path)
    cause_lines = {(_abs(x.path), x.line) for x in r.related} - ({crash_line} if crash_line
                                                                   else set())
    files = {r_path} | {p for p, _ in cause_lines}
    best: tuple[tuple[int, int], int, bool] | None = None
    in_family = [i for i, s in enumerate(static) if s.code in allowed and i not in used]
    for i in in_family:
        s = static[i]
        where = (_abs(s.path), s.line)
        if where == (r_path, r.line):  # one line, two views: the runtime's words are what
            score, lead = 100, s.code == r.code  # happened, unless both name the same bug
        elif where in cause_lines:  # an exact runtime line keeps the lead over its context
            score, lead = 80, r.code not in _EXACT and r.code not in _LEADS_CONTEXT
        elif r.code in _EXACT or r.code in _LINES_ONLY:
            continue
        elif where[0] in files:
            score, lead = 40 + 20 * (s.code == r.code), True
        elif s.code == r.code or (len(in_family) == 1 and any(f in _SPECIFIC for f in fams)):
            score, lead = 20, True
        else:
            continue
        if crash_line is not None and where == crash_line and (r_path, r.line) != where:
            lead = False  # the static finding sits on the symptom's line: the runtime's leads
        if where in cause_lines and (r_path, r.line) != where and any(
                f in _RUNTIME_PICKS for f in fams) and (r_path, r.line) in {
                (_abs(x.path), x.line) for x in s.related}:
            lead = False  # each names the other's line: the runtime saw which one caused it
        distance = abs(s.line - r.line) if where[0] == r_path else 10**6
        rank = (score, -distance)
        if best is None or rank > best[0]:
            best = (rank, i, lead)
    return None if best is None else (best[1], best[2])


def _predicts(s: Finding, r: Finding) -> bool:
    """Whether ``s`` quotes the error the general crash ``r`` reports.
    NOTE [error it predicts]"""
    m = _PREDICTED.search(s.message)
    return m is not None and m[1][:60].lower() in r.message.lower()


def _merge_related(*groups: Iterable[Related]) -> tuple[Related, ...]:
    out: list[Related] = []
    seen: set[tuple[str, int, str]] = set()
    for group in groups:
        for r in group:
            key = (r.path, r.line, r.message)
            if key not in seen:
                seen.add(key)
                out.append(r)
    return tuple(out)


def confirm(s: Finding, r: Finding, lead: bool) -> Finding:
    """The static finding ``s`` confirmed by the runtime finding ``r``."""
    if lead:
        evidence = Related(r.path, r.line, f"{CONFIRMED}({r.code}) {r.message}", r.column)
        related = _merge_related(s.related, (evidence,), r.related)
        return replace(s, related=related, severity=r.severity, fix=s.fix or r.fix,
                       source="static+runtime")
    also = Related(s.path, s.line, f"{STATIC_ALSO}({s.code}) {s.message}", s.column)
    return replace(r, related=_merge_related(r.related, (also,)), source="static+runtime")


def fuse(runtime: list[Finding], static: list[Finding], ran: dict[str, list[tuple[int, int]]],
         crash_line: tuple[str, int] | None = None, unconfirmed: bool = True,
         progress: tuple[int, int] = (0, 0)) -> list[Finding]:
    """Runtime findings (in the runtime's order), each replaced by the static finding that
    accounts for it if there is one, then the unconfirmed static findings on code that ran.
    See NOTE [ranking]."""
    used: set[int] = set()
    out: list[Finding] = []
    fams: list[tuple[str, ...]] = []  # the symptom families of each runtime finding in out
    for r in runtime:
        hit = _candidates(r, static, used, crash_line)
        if hit is None and r.code == "GT820" and OUTPUT_UNUSED in r.message:
            continue  # NOTE [never graded by design] in gradtrace/runtime/build.py
        if hit is None:
            same = _SEEN_TWICE.get(r.code)
            if same is None or not any((f.code, f.path) == (r.code, r.path) and (
                    same == "file" or f.line == r.line) for f in out):
                out.append(r)
                fams.append(_families(r))
            continue
        i, lead = hit
        used.add(i)
        fused = confirm(static[i], r, lead)
        if fused not in out:
            out.append(fused)
            fams.append(_families(r))
    if crash_line is None:
        out = _confirmed_first(out, fams)
    shown = {(f.path, f.line) for f in out} | {(x.path, x.line) for f in out for x in f.related}
    for i, s in enumerate(static if unconfirmed else ()):
        if i in used or s.severity == "info":
            continue
        spans = ran.get(_abs(s.path), ())
        if any(a <= s.line <= b for a, b in spans) and (s.path, s.line) not in shown \
                and not refuted(s, *progress):
            out.append(s)
            shown.add((s.path, s.line))
    return out


def _confirmed_first(out: list[Finding], fams: list[tuple[str, ...]]) -> list[Finding]:
    """Of two things the run saw of one symptom family with one severity (two cuts on the
    paths of the same parameters), the one the code also shows first (NOTE [ranking], 2)."""
    order = list(range(len(out)))
    for j, f in enumerate(out):
        if f.source != "static+runtime" or not fams[j]:
            continue
        for pos, i in enumerate(order):
            if i == j:
                break
            g = out[i]
            if g.source == "runtime" and g.severity == f.severity and set(fams[i]) & set(
                    fams[j]):
                order.remove(j)
                order.insert(pos, j)
                break
    return [out[i] for i in order]


# The graph-break rules' words for a cut in one term of a sum (``loss = a + b.detach()``): the
# other terms keep the loss on the graph, so backward() runs and parameters get gradients; a
# run shows no symptom of such a cut, hence cannot refute it.
_ONE_TERM = "this term of the loss"
# Refutable rules in a form whose symptom the run does not watch: the run finds layers held in
# a plain container (the module hooks see them run), not Parameters held in one (a plain dict
# of ``nn.Parameter`` used in forward gets gradients and no step, and the run says nothing).
_UNWATCHED = {"GT401": "of parameters"}


def refuted(s: Finding, backwards: int, steps: int) -> bool:
    """Whether a run that made ``backwards`` backward passes and ``steps`` optimizer steps
    would have shown the symptom of static finding ``s`` had it been real (see _REFUTABLE)."""
    need = _REFUTABLE.get(s.code)
    if need is None or backwards == 0 or steps < need or _ONE_TERM in s.message \
            or s.code in _UNWATCHED and _UNWATCHED[s.code] in s.message:
        return False
    return s.code not in _WATCHED_FORM or _statement_is(s, _WATCHED_FORM[s.code])


# Refutable rules whose symptom the runtime watches in one form of statement only: a running
# total kept with the graph is seen on ``total += loss`` (an in-place add on a tensor), never
# on ``history.append(out)`` or ``total = total + loss``, which no torch call reveals.
_WATCHED_FORM: dict[str, type] = {"GT505": ast.AugAssign}


def _statement_is(s: Finding, kind: type) -> bool:
    """Whether the statement starting on the finding's line parses as one ``kind`` node."""
    text = linecache.getline(_abs(s.path), s.line).strip()
    try:
        body = ast.parse(text).body
    except SyntaxError:
        return False
    return len(body) == 1 and isinstance(body[0], kind)


def fuse_session(runtime: list[Finding], codes: Iterable[CodeType],
                 crash_line: tuple[str, int] | None = None,
                 unconfirmed: bool = True, progress: tuple[int, int] = (0, 0)) -> list[Finding]:
    """:func:`fuse` for a tracing session: check every user file among ``codes`` and the
    runtime findings' files. Never raises: on a failure the runtime findings come back as
    they are."""
    try:
        ran = code_spans(codes)
        prefixes = library_prefixes()
        files = dict.fromkeys(ran)
        for r in runtime:
            if is_user_file(r.path, prefixes) and not r.path.startswith("<"):
                files.setdefault(_abs(r.path))
        static: list[Finding] = []
        for path in files:
            static.extend(static_findings(path))
        if crash_line is not None:
            crash_line = (_abs(crash_line[0]), crash_line[1])
        return fuse(runtime, static, ran, crash_line, unconfirmed, progress)
    except Exception:
        if strict():
            raise
        LOG.debug("gradtrace: fusing static findings failed", exc_info=True)
        return list(runtime)


def rank_key(f: Finding) -> tuple[int, int, int]:
    """Sort key keeping NOTE [ranking]: runtime-seen findings first, errors before warnings;
    the general crash finding (NOTE [general crash]) after every other runtime finding."""
    return (f.source == "static", f.code == GENERAL_CRASH,
            {"error": 0, "warning": 1, "info": 2}.get(f.severity, 3))


GENERAL_CRASH = "GT839"  # gradtrace.runtime.trace.crash_general.CODE
