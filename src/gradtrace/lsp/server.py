"""`gradtrace server`: the language server (pygls, stdio).

# NOTE [push or pull]
A client that can pull diagnostics (``textDocument/diagnostic``) is offered pull only; the
others get them pushed (``textDocument/publishDiagnostics``, with the document version) on open,
on save and after a pause in typing (``DEBOUNCE`` seconds), and an empty list on close. Doing
both would show every finding twice in clients that keep the two apart (VS Code, Neovim).
When a pyproject.toml changes, pushed documents are checked again and pulling clients are
asked to refresh.

# NOTE [never dies]
Every handler runs under :func:`guarded`: an exception from gradtrace's own code is logged to
the client (``window/logMessage``) and the request answers empty; the server goes on. A rule
that crashes on a document, and a pyproject.toml that cannot be read, are shown to the user
once per session (``window/showMessage``), not on every keystroke.
"""
from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from lsprotocol import types
from pygls.capabilities import get_capability
from pygls.lsp.server import LanguageServer

from gradtrace._version import __version__
from gradtrace.errors import ConfigError
from gradtrace.findings import Finding
from gradtrace.lint import check_text
from gradtrace.lint.config import Settings, load_settings
from gradtrace.lint.fix import fixable
from gradtrace.lsp import convert
from gradtrace.lsp.convert import Positions, WorkspaceEditMaker

LOG = logging.getLogger(__name__)
DEBOUNCE = 0.3  # seconds of quiet typing before a changed document is checked again
CRASH_CODE = "GT002"  # a rule raised on the file (when the engine reports it as a finding)
RULE_CODE = re.compile(r"\bGT\d{3}\b")


@dataclass
class Checked:
    """The findings of one version of a document and their diagnostics."""

    version: int | None
    text: str
    path: str
    settings: Settings
    pairs: list[tuple[Finding, types.Diagnostic]] = field(default_factory=list)


class GradtraceServer(LanguageServer):
    """State: the last check of each open document, pending checks, what was reported once."""

    def __init__(self) -> None:
        super().__init__("gradtrace", __version__,
                         text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.checked: dict[str, Checked] = {}
        self.pending: dict[str, asyncio.TimerHandle] = {}
        self.told: set[str] = set()
        self.pull = False

    # -- client capabilities ---------------------------------------------------------------
    def can(self, field_: str) -> bool:
        return bool(get_capability(self.client_capabilities, field_, False))

    @property
    def encoding(self) -> str:
        return str(self.workspace.position_encoding or "utf-16")

    # -- telling the user --------------------------------------------------------------------
    def tell_once(self, key: str, message: str, kind: types.MessageType) -> None:
        self.window_log_message(types.LogMessageParams(type=kind, message=message))
        if key not in self.told:
            self.told.add(key)
            self.window_show_message(types.ShowMessageParams(type=kind, message=message))

    # -- checking ----------------------------------------------------------------------------
    def settings_for(self, path: str) -> Settings:
        """The settings of the nearest pyproject.toml, read afresh (it may have changed)."""
        try:
            return load_settings(os.path.dirname(path) or ".")
        except ConfigError as exc:
            self.tell_once(f"config:{exc}", f"gradtrace: {exc}; using the default settings",
                           types.MessageType.Warning)
            return Settings()

    def check(self, uri: str) -> Checked | None:
        """Check the open document now (None when it is not open)."""
        doc = self.workspace.text_documents.get(uri)
        if doc is None:
            return None
        path = doc.path if uri.startswith("file:") else (doc.filename or "untitled.py")
        text = doc.source
        settings = self.settings_for(path)
        checked = Checked(doc.version, text, path, settings)
        python = doc.language_id == "python" or path.endswith((".py", ".pyi"))
        if python and "torch" in text and not _excluded(path, settings):
            result = check_text(text, path, settings)
            crashes = [*result.rule_errors,
                       *(f.message for f in result.findings if f.code == CRASH_CODE)]
            for problem in crashes:
                codes = [c for c in RULE_CODE.findall(problem) if c != CRASH_CODE]
                self.tell_once(f"crash:{codes[0] if codes else problem}",
                               f"gradtrace: {problem}; its findings are missing from this "
                               "file (please report this)", types.MessageType.Error)
            pos = Positions(text, self.encoding)
            related = self.can("text_document.publish_diagnostics.related_information")
            for f in result.findings:
                checked.pairs.append((f, convert.diagnostic(f, uri, pos, related,
                                                            docs_uri(f.code))))
        self.checked[uri] = checked
        return checked

    def current(self, uri: str) -> Checked | None:
        """The check of the document's current version (checked now if it is stale)."""
        doc = self.workspace.text_documents.get(uri)
        known = self.checked.get(uri)
        if doc is not None and known is not None and known.version == doc.version \
                and known.text == doc.source:
            return known
        return self.check(uri)

    def publish(self, uri: str) -> None:
        pending = self.pending.pop(uri, None)
        if pending is not None:
            pending.cancel()  # a save or an open overtakes the debounced check
        if self.pull:
            return
        checked = self.check(uri)
        if checked is not None:
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
                uri=uri, version=checked.version, diagnostics=[d for _, d in checked.pairs]))

    def schedule(self, uri: str, delay: float) -> None:
        """Check ``uri`` after ``delay`` seconds unless it changes again (debounce)."""
        old = self.pending.pop(uri, None)
        if old is not None:
            old.cancel()
        if self.pull:
            return
        loop = asyncio.get_running_loop()
        self.pending[uri] = loop.call_later(delay, guarded(self.publish), uri)

    def recheck_all(self) -> None:
        """After a configuration change: every open document again."""
        if self.pull:
            if self.can("workspace.diagnostics.refresh_support"):
                self.workspace_diagnostic_refresh(None)
            return
        for uri in list(self.workspace.text_documents):
            self.publish(uri)


def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """NOTE [never dies]: log an exception from ``fn`` and answer None."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the server must never die
            LOG.exception("gradtrace server: %s failed", fn.__name__)
            server = SERVER
            try:
                server.tell_once(f"internal:{type(exc).__name__}",
                                 f"gradtrace: internal error in {fn.__name__}: "
                                 f"{type(exc).__name__}: {exc} (please report this)",
                                 types.MessageType.Error)
            except Exception:  # noqa: BLE001 - not even while telling
                pass
            return None
    return wrapper


def _excluded(path: str, settings: Settings) -> bool:
    """Whether the file or a folder on its way down from the project root is excluded."""
    full = os.path.abspath(path)
    root = os.path.abspath(settings.root)
    if settings.is_excluded(full):
        return True
    parent = os.path.dirname(full)
    while parent.startswith(root + os.sep):
        if settings.is_excluded(parent):
            return True
        parent = os.path.dirname(parent)
    return False


@functools.lru_cache(maxsize=None)
def docs_uri(code: str) -> str | None:
    """A file: URI of the rule's full text (`gradtrace explain CODE`), written once per version.

    Local, so that the link works offline and always matches the installed rules.
    """
    from pathlib import Path

    from gradtrace.codes import lookup
    from gradtrace.docs import explain_code

    entry = lookup(code)
    if entry is None:
        return None
    text = explain_code(entry)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = os.path.join(base, "gradtrace", "rules", __version__)
    target = os.path.join(folder, f"{code}.md")
    try:
        if not os.path.isfile(target) or Path(target).read_text(encoding="utf-8") != text:
            os.makedirs(folder, exist_ok=True)
            tmp = f"{target}.{os.getpid()}.tmp"
            Path(tmp).write_text(text, encoding="utf-8")
            os.replace(tmp, target)
    except OSError:
        return None
    return Path(target).as_uri()


SERVER = GradtraceServer()


@SERVER.feature(types.INITIALIZE)
@guarded
def initialize(ls: GradtraceServer, params: types.InitializeParams) -> None:
    ls.pull = get_capability(params.capabilities, "text_document.diagnostic") is not None
    if ls.pull:
        ls.feature(types.TEXT_DOCUMENT_DIAGNOSTIC, types.DiagnosticOptions(
            identifier="gradtrace", inter_file_dependencies=False,
            workspace_diagnostics=False))(pull_diagnostics)


@SERVER.feature(types.INITIALIZED)
@guarded
def initialized(ls: GradtraceServer, params: types.InitializedParams) -> None:
    if ls.can("workspace.did_change_watched_files.dynamic_registration"):
        ls.client_register_capability(types.RegistrationParams(registrations=[types.Registration(
            id="gradtrace-pyproject", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
            register_options=types.DidChangeWatchedFilesRegistrationOptions(watchers=[
                types.FileSystemWatcher(glob_pattern="**/pyproject.toml")]))]))


@SERVER.feature(types.TEXT_DOCUMENT_DID_OPEN)
@guarded
def did_open(ls: GradtraceServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.publish(params.text_document.uri)


@SERVER.feature(types.TEXT_DOCUMENT_DID_CHANGE)
@guarded
def did_change(ls: GradtraceServer, params: types.DidChangeTextDocumentParams) -> None:
    ls.schedule(params.text_document.uri, DEBOUNCE)


@SERVER.feature(types.TEXT_DOCUMENT_DID_SAVE)
@guarded
def did_save(ls: GradtraceServer, params: types.DidSaveTextDocumentParams) -> None:
    if params.text_document.uri.endswith("/pyproject.toml"):
        ls.recheck_all()
    else:
        ls.publish(params.text_document.uri)


@SERVER.feature(types.TEXT_DOCUMENT_DID_CLOSE)
@guarded
def did_close(ls: GradtraceServer, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    pending = ls.pending.pop(uri, None)
    if pending is not None:
        pending.cancel()
    ls.checked.pop(uri, None)
    if not ls.pull:
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri,
                                                                            diagnostics=[]))


@SERVER.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
@guarded
def did_change_watched(ls: GradtraceServer, params: types.DidChangeWatchedFilesParams) -> None:
    if any(c.uri.endswith("/pyproject.toml") for c in params.changes):
        ls.recheck_all()


@guarded
def pull_diagnostics(ls: GradtraceServer, params: types.DocumentDiagnosticParams
                     ) -> types.DocumentDiagnosticReport:
    checked = ls.current(params.text_document.uri)
    items = [d for _, d in checked.pairs] if checked is not None else []
    digest = hashlib.blake2b(repr(items).encode(), digest_size=12).hexdigest()
    if params.previous_result_id == digest:
        return types.RelatedUnchangedDocumentDiagnosticReport(result_id=digest)
    return types.RelatedFullDocumentDiagnosticReport(items=items, result_id=digest)


@SERVER.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
    code_action_kinds=[types.CodeActionKind.QuickFix, convert.FIX_ALL_KIND]))
@guarded
def code_action(ls: GradtraceServer, params: types.CodeActionParams
                ) -> list[types.CodeAction] | None:
    uri = params.text_document.uri
    checked = ls.current(uri)
    if checked is None:
        return None
    only = params.context.only
    edit = WorkspaceEditMaker(uri, checked.version,
                              ls.can("workspace.workspace_edit.document_changes"))
    pos = Positions(checked.text, ls.encoding)
    actions: list[types.CodeAction] = []
    if convert.wanted(types.CodeActionKind.QuickFix, only):
        first, last = params.range.start.line + 1, params.range.end.line + 1
        allowed = convert.comment_lines(checked.text)
        for f, diag in checked.pairs:
            if f.line <= last and (f.end_line or f.line) >= first:
                for action in (convert.quick_fix(f, diag, pos, edit),
                               convert.noqa(f, diag, pos, allowed, edit)):
                    if action is not None:
                        actions.append(action)
    if convert.wanted(convert.FIX_ALL_KIND, only):
        action = _fix_all(checked, ls.encoding, edit)
        if action is not None:
            actions.append(action)
    return actions


def _fix_all(checked: Checked, encoding: str, edit: WorkspaceEditMaker
             ) -> types.CodeAction | None:
    """Every safe fix, applied and re-checked until nothing changes (as `check --fix`)."""
    from gradtrace.lint.fix import fix_loop

    findings = [f for f, _ in checked.pairs]
    if not any(fixable(f, False) for f in findings):
        return None
    outcome, _ = fix_loop(checked.path, checked.text, findings, checked.settings, False)
    if not outcome.changed:
        return None
    return types.CodeAction(title="gradtrace: fix all safely fixable problems",
                            kind=convert.FIX_ALL_KIND,
                            edit=edit([convert.whole_text_edit(checked.text, outcome.new,
                                                               encoding)]))
