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
finding's place in the ranking. A static finding on a line the runtime only named as context
is attached to the runtime's line when the runtime's own line is the exact operation
(``_EXACT``: the in-place write, the consumer of an undetached fake, the backward() that freed a
shared graph...); it is not a candidate when that context line is where the program crashed.

# NOTE [cause on the crash line]
A static finding that sits on the line where the program crashed, and whose rule accounts for
the runtime's finding, leads over a runtime finding that names another line: the traceback passes
through its line and its mechanism explains the error, so it is the cause whatever else the run
saw (InfoMaxVAE: the run names `optim_VAE.step()`, which changed the saved weights, the static
GT601 the `info_loss.backward()` that reads the graph kept across that step, the line the
maintainer changed). This holds for the symptoms of a graph read after it was freed or
changed (``_READ_AFTER_CHANGE``), where the crash line is the read that must move; for the
others the crash line is the symptom (a `backward()` of a loss left unreduced: the line that made
it unreduced is the cause) and the runtime's line leads, the static finding attached to it.
The runtime's evidence is attached as ``confirmed at run time``. Only
runtime findings whose line is not the exact operation get here (``_EXACT`` ones never take a
crash-line static finding as a candidate: a helper's in-place write under the call the runtime
names, e2cnn's `generalized_he_init(...)`, stays the runtime's).
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
                                   scripted_spans,
                                   ran_codes)
from gradtrace.runtime.fuse_tables import (
    EXPLAINS, _EXACT, _FAMILY, _LEADS_CONTEXT, _LINES_ONLY, _NEVER_NAMED, _REFUTABLE,
    _RUNTIME_PICKS, _SEEN_TWICE, _SPECIFIC, _STATEMENT_LEADS)

LOG = logging.getLogger(__name__)

CONFIRMED = "confirmed at run time "
# NOTE [crash in related]
# A static finding whose cause and symptom are on different lines (a param group added after
# the scheduler, GT533) names the line that will raise in a related entry worded
# "... raises here"; a general crash on that line is then its symptom, and its line leads. So
# does a specific runtime diagnosis on the crash line whose symptom the rule explains
# (EfficientDet: the run's GT302 at the ReLU applied to a weight, GT133's `m.inplace = True`).
RAISES_HERE = "raises here"
# NOTE [error it predicts]
# A static finding that quotes the error its bug raises (GT619: "raises `RuntimeError:
# unsupported operation: more than one element ...`") in the file of a general crash whose
# error is that one (the write into an expand() view fails in backward(), far from the write):
# the crash is its symptom, and its line leads (the first such finding of the file).
# NOTE [predicted error that never came]
# A static finding whose error is raised by its own line's op (GT103: "NumPy reads each tensor
# through `.numpy()`, which raises `RuntimeError: Can't call numpy() on Tensor that requires
# grad`"; `_RAISES_AT_LINE`) in a run that did not crash: the error never came (the program
# detached the tensor before NumPy, elsewhere), so the static reading of the mechanism is not
# what happened. A runtime dead-term finding on another line (GT844 at the `.detach()` whose
# NumPy term is a dead loss term) says what did: its line leads, the static one is kept as
# context. A static finding whose quoted error comes at a backward() (GT108: "`backward()` on
# it raises ...") keeps its lead: a dead term is exactly the case where that backward() never
# runs alone. Other families keep the static lead: their runtime line is often the symptom's.
_RAISES_AT_LINE = frozenset({"GT103"})
_PREDICTED = re.compile(r"raises `(?:\w+(?:Error|Exception): )?([^`]{24,})`")
STATIC_ALSO = "also found by reading the code: "

_CACHE: dict[str, tuple[Any, list[Finding]]] = {}
_SETTINGS: dict[str, Any] = {}

# symptom families whose crash line is the read to move: NOTE [cause on the crash line]
_READ_AFTER_CHANGE = frozenset({"freed-graph", "inplace-saved"})


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
                crash_line: tuple[str, int] | None,
                ran: dict[str, list[tuple[int, int]]] | None = None) -> tuple[int, bool] | None:
    """(index of the static finding that accounts for ``r``, whether it leads), or None.
    Of candidates with one score, one on code that ran comes first:
    NOTE [body that never ran]."""
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
    if crash_line is not None and (r_path, r.line) == crash_line:  # NOTE [crash in related]
        said = next((i for i in in_family if any(
            (_abs(x.path), x.line) == crash_line and x.message.endswith(RAISES_HERE)
            for x in static[i].related)), None)
        if said is not None:
            return said, True
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
        if (r.code, s.code) in _STATEMENT_LEADS and where != (r_path, r.line):
            lead = False  # the run's statement inside the block or helper the finding names
        if crash_line is not None and where == crash_line and (r_path, r.line) != where:
            lead = any(f in _READ_AFTER_CHANGE for f in fams)  # NOTE [cause on the crash line]
        if crash_line is None and lead and where != (r_path, r.line) \
                and "dead-term" in fams and s.code in _RAISES_AT_LINE:
            lead = False  # NOTE [predicted error that never came]
        if where in cause_lines and (r_path, r.line) != where and any(
                f in _RUNTIME_PICKS for f in fams) and (r_path, r.line) in {
                (_abs(x.path), x.line) for x in s.related}:
            lead = False  # each names the other's line: the runtime saw which one caused it
        distance = abs(s.line - r.line) if where[0] == r_path else 10**6
        rank = (score, _ran_at(ran, where), -distance)
        if best is None or rank > best[0]:
            best = (rank, i, lead)
    return None if best is None else (best[1], best[2])


# NOTE [body that never ran]
# A static finding inside a function that never ran did not cause what the run saw; when the
# file's candidates tie, one on code that ran (NOTE [code that ran]) explains the symptom.
# CMC's `CNNModel` misnames `__init__` as `_init_`: GT444 on that `def` line (a line of the
# class body, which ran) says why the model has no parameters; GT401 on the plain list of layers
# inside `_init_` sits in a body that never ran and is no longer the nearer candidate that
# leads. Only a file the run has lines for says anything (no spans: every candidate counts as
# ran), and only among candidates of one score (the runtime's own line and the lines it named
# rank first whatever ran).
def _ran_at(ran: dict[str, list[tuple[int, int]]] | None, where: tuple[str, int]) -> bool:
    spans = ran.get(where[0]) if ran else None
    return not spans or any(a <= where[1] <= b for a, b in spans)


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
        hit = _candidates(r, static, used, crash_line, ran)
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
# and for a Parameter read through ``.data`` on one path of several (GT105):
# the layer's live call still gives it a gradient (NOTE [layer parameter read through data]).
_ONE_PATH = "this path gives"
# Refutable rules in a form whose symptom the run does not watch: the run finds layers held in
# a plain container (the module hooks see them run), not Parameters held in one (a plain dict
# of ``nn.Parameter`` used in forward gets gradients and no step, and the run says nothing).
_UNWATCHED = {"GT401": "of parameters"}


def refuted(s: Finding, backwards: int, steps: int) -> bool:
    """Whether a run that made ``backwards`` backward passes and ``steps`` optimizer steps
    would have shown the symptom of static finding ``s`` had it been real (see _REFUTABLE)."""
    need = _REFUTABLE.get(s.code)
    if need is None or backwards == 0 or steps < need or _ONE_TERM in s.message \
            or _ONE_PATH in s.message \
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
                 unconfirmed: bool = True, progress: tuple[int, int] = (0, 0),
                 more: dict[str, list[tuple[int, int]]] | None = None) -> list[Finding]:
    """:func:`fuse` for a tracing session: check every user file among ``codes`` (and the
    spans in ``more``: code that ran in forked children) and the runtime findings' files.
    Never raises: on a failure the runtime findings come back as they are."""
    try:
        ran = code_spans(codes)
        for path, spans in (more or {}).items():
            ran.setdefault(path, []).extend(spans)
        scripted_spans(ran)  # NOTE [scripted bodies ran with their def]
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
