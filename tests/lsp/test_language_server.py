"""`gradtrace server` driven over stdio by pytest-lsp, as VS Code (push diagnostics, UTF-16)
and as Neovim 0.11 (pull diagnostics, UTF-8) would drive it."""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

pytest.importorskip("pygls")
pytest_lsp = pytest.importorskip("pytest_lsp")

from lsprotocol import types  # noqa: E402
from pygls.protocol import default_converter  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SERVER = [sys.executable, "-m", "gradtrace", "server"]
# GT407 (unsafe fix) on line 4, GT101 (safe fix) on line 6, after non-ASCII text
DOC = """\
import torch
import torchvision
model = torchvision.models.resnet18()
model.requires_grad = False
loss = torch.nn.functional.mse_loss(model(x), y)
s = "é😀"; loss.item().backward()
"""
GT101_COL = {"utf-16": 11, "utf-8": 14}  # `loss` after `s = "é😀"; ` (9 code points)
MODULE = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module", autouse=True)
def _rule_docs_in_tmp(tmp_path_factory: pytest.TempPathFactory):
    """The server writes the rules' docs under $XDG_CACHE_HOME: keep them out of $HOME."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg")))
        yield


def _client() -> LanguageClient:
    """The test client, also keeping every publication in order (``published``)."""
    from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

    client = LanguageClient(converter_factory=default_converter)
    client.registrations = []  # type: ignore[attr-defined]
    client.published = []  # type: ignore[attr-defined]
    client.consumed = {}  # type: ignore[attr-defined]

    def register(params: types.RegistrationParams) -> None:
        client.registrations.extend(params.registrations)  # type: ignore[attr-defined]

    def publish(params: types.PublishDiagnosticsParams) -> None:
        client.diagnostics[params.uri] = params.diagnostics
        client.published.append(params)  # type: ignore[attr-defined]

    register_lsp_features(client, {**DEFAULT_CLIENT_FEATURES,
                                   types.CLIENT_REGISTER_CAPABILITY: register,
                                   types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: publish})
    return client


async def _start(lsp_client: LanguageClient, spec: str) -> types.InitializeResult:
    return await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities(spec), root_uri=Path.cwd().as_uri()))


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(SERVER, client_factory=_client))
async def vscode(lsp_client: LanguageClient):
    lsp_client.init_result = await _start(lsp_client, "visual-studio-code")
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(SERVER, client_factory=_client))
async def neovim(lsp_client: LanguageClient):
    lsp_client.init_result = await _start(lsp_client, "neovim@v0.11")
    yield
    await lsp_client.shutdown_session()


def _open(client: LanguageClient, uri: str, text: str, version: int = 1) -> None:
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=(
        types.TextDocumentItem(uri=uri, language_id="python", version=version, text=text))))


async def _opened(client: LanguageClient, path: Path, text: str = DOC) -> str:
    """Open ``path`` with ``text`` and wait for its first diagnostics; returns its URI."""
    uri = path.as_uri()
    _open(client, uri, text)
    await _published(client, uri)
    return uri


def _save(client: LanguageClient, uri: str) -> None:
    client.text_document_did_save(types.DidSaveTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))


def _change(client: LanguageClient, uri: str, version: int, line: int, text: str) -> None:
    """Replace line ``line`` (0-based) incrementally."""
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=types.Position(line=line, character=0),
                              end=types.Position(line=line + 1, character=0)),
            text=text)]))


async def _published(client: LanguageClient, uri: str) -> types.PublishDiagnosticsParams:
    """The next publication for ``uri`` after the last one a test looked at."""
    for _ in range(400):
        start = client.consumed.get(uri, -1) + 1  # type: ignore[attr-defined]
        for i in range(start, len(client.published)):  # type: ignore[attr-defined]
            if client.published[i].uri == uri:  # type: ignore[attr-defined]
                client.consumed[uri] = i  # type: ignore[attr-defined]
                return client.published[i]  # type: ignore[attr-defined]
        await asyncio.sleep(0.05)
    raise AssertionError(f"nothing published for {uri}")


def _apply(text: str, edits) -> str:
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def at(p: types.Position) -> int:  # UTF-16 units -> code points
        units = col = 0
        line = lines[p.line] if p.line < len(lines) else ""
        while units < p.character:
            units += 2 if ord(line[col]) > 0xFFFF else 1
            col += 1
        return offsets[p.line] + col

    for e in sorted(edits, key=lambda e: at(e.range.start), reverse=True):
        text = text[:at(e.range.start)] + e.new_text + text[at(e.range.end):]
    return text


async def _actions(client: LanguageClient, uri: str, line: int, only=None):
    return await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(start=types.Position(line=line, character=0),
                          end=types.Position(line=line, character=0)),
        context=types.CodeActionContext(diagnostics=[], only=only)))


@MODULE
async def test_push_client_gets_diagnostics_with_version_code_link_and_related(
        vscode: LanguageClient, tmp_path: Path):
    assert vscode.init_result.capabilities.diagnostic_provider is None  # VS Code 1.65: no pull
    for _ in range(100):  # the server asks right after `initialized`
        if vscode.registrations:
            break
        await asyncio.sleep(0.05)
    assert [r.method for r in vscode.registrations] == ["workspace/didChangeWatchedFiles"]
    assert "**/pyproject.toml" in str(vscode.registrations[0].register_options)
    uri = (tmp_path / "doc.py").as_uri()
    _open(vscode, uri, DOC)
    got = await _published(vscode, uri)
    assert got.version == 1
    by_code = {d.code: d for d in got.diagnostics}
    assert sorted(by_code) == ["GT101", "GT407"]
    d = by_code["GT101"]
    assert (d.range.start.line, d.range.start.character) == (5, GT101_COL["utf-16"])
    assert d.severity == types.DiagnosticSeverity.Error and d.source == "gradtrace"
    doc = Path.from_uri(d.code_description.href) if hasattr(Path, "from_uri") else Path(
        d.code_description.href[len("file://"):])
    assert doc.read_text().startswith("GT101 backward-on-python-number")
    # related places: GT502 in the bundled example points at the step inside the loop
    uri2 = (tmp_path / "loop.py").as_uri()
    _open(vscode, uri2, (EXAMPLES / "training_loop.py").read_text())
    got = await _published(vscode, uri2)
    d = next(d for d in got.diagnostics if d.code == "GT502")
    assert d.related_information and d.related_information[0].location.uri == uri2
    assert d.related_information[0].location.range.start.line == 15
    # another language is left alone, even when it mentions torch
    uri3 = (tmp_path / "pyproject.toml").as_uri()
    toml = '[project]\nrequires-python = ">=3.10"\ndependencies = ["torch"]\n'  # not Python
    vscode.text_document_did_open(types.DidOpenTextDocumentParams(text_document=(
        types.TextDocumentItem(uri=uri3, language_id="toml", version=1, text=toml))))
    assert list((await _published(vscode, uri3)).diagnostics) == []


@MODULE
async def test_changes_are_debounced_saves_check_now_and_close_clears(
        vscode: LanguageClient, tmp_path: Path):
    uri = await _opened(vscode, tmp_path / "doc.py")
    _change(vscode, uri, 2, 3, "model.requires_grad_(False)\n")   # GT407 fixed by hand
    _change(vscode, uri, 3, 0, "import torch  # edited\n")
    _change(vscode, uri, 4, 2, "\n")                               # a blank line
    got = await _published(vscode, uri)
    assert got.version == 4                                        # one check, the last text
    assert [d.code for d in got.diagnostics] == ["GT101"]
    _change(vscode, uri, 5, 4, "loss = torch.nn.functional.mse_loss(model(x), y\n")
    _save(vscode, uri)
    got = await _published(vscode, uri)
    assert got.version == 5 and [(d.code, d.range.start.line) for d in got.diagnostics] == \
        [("GT000", 4)]
    vscode.text_document_did_close(types.DidCloseTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    got = await _published(vscode, uri)
    assert list(got.diagnostics) == []


@MODULE
async def test_code_actions_quick_fix_unsafe_label_noqa_and_fix_all(
        vscode: LanguageClient, tmp_path: Path):
    uri = await _opened(vscode, tmp_path / "doc.py")
    actions = await _actions(vscode, uri, 3)                       # the GT407 line
    titles = [a.title for a in actions]
    assert titles[0] == "Call `requires_grad_()` (GT407, unsafe)" and not actions[0].is_preferred
    assert "Ignore GT407 on this line (# noqa)" in titles
    noqa = next(a for a in actions if "noqa" in a.title)
    edits = noqa.edit.document_changes[0].edits
    assert noqa.edit.document_changes[0].text_document.version == 1
    assert _apply(DOC, edits).splitlines()[3] == "model.requires_grad = False  # noqa: GT407"
    fix = _apply(DOC, actions[0].edit.document_changes[0].edits)
    assert fix.splitlines()[3] == "model.requires_grad_(False)"
    # fix all: the safe fixes only (GT101), not GT407's unsafe one
    only = [types.CodeActionKind.SourceFixAll]
    (fix_all,) = await _actions(vscode, uri, 0, only)
    assert fix_all.kind == "source.fixAll.gradtrace"
    fixed = _apply(DOC, fix_all.edit.document_changes[0].edits)
    assert fixed.splitlines()[3] == "model.requires_grad = False"
    assert fixed.splitlines()[5] == 's = "é😀"; loss.backward()'
    assert not await _actions(vscode, uri, 3, [types.CodeActionKind.Refactor])
    # an existing noqa gets the code added
    uri2 = (tmp_path / "noqa.py").as_uri()
    _open(vscode, uri2, DOC.replace("= False\n", "= False  # noqa: GT1\n"))
    await _published(vscode, uri2)
    noqa = next(a for a in await _actions(vscode, uri2, 3) if "noqa" in a.title)
    assert _apply(DOC.replace("= False\n", "= False  # noqa: GT1\n"),
                  noqa.edit.document_changes[0].edits).splitlines()[3] == \
        "model.requires_grad = False  # noqa: GT1, GT407"


@MODULE
async def test_pyproject_is_read_and_reread_when_it_changes(
        vscode: LanguageClient, tmp_path: Path):
    project = tmp_path / "proj"
    (project / "pkg").mkdir(parents=True)
    config = project / "pyproject.toml"
    config.write_text('[tool.gradtrace]\nignore = ["GT407"]\n')
    uri = (project / "pkg" / "doc.py").as_uri()
    _open(vscode, uri, DOC)
    assert [d.code for d in (await _published(vscode, uri)).diagnostics] == ["GT101"]

    def changed() -> None:
        vscode.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(changes=[
            types.FileEvent(uri=config.as_uri(), type=types.FileChangeType.Changed)]))

    config.write_text('[tool.gradtrace]\nignore = ["GT1"]\n')
    changed()
    assert [d.code for d in (await _published(vscode, uri)).diagnostics] == ["GT407"]
    config.write_text('[tool.gradtrace]\nignroe = ["GT1"]\n')      # a typo: defaults, told once
    changed()
    assert sorted(d.code for d in (await _published(vscode, uri)).diagnostics) == \
        ["GT101", "GT407"]
    changed()
    await _published(vscode, uri)
    told = [m for m in vscode.messages if "ignroe" in m.message]
    assert len(told) == 1 and told[0].type == types.MessageType.Warning
    config.write_text('[tool.gradtrace]\nextend-exclude = ["pkg"]\n')
    changed()
    assert list((await _published(vscode, uri)).diagnostics) == []  # excluded folder


@MODULE
async def test_survives_anything_typed(vscode: LanguageClient, tmp_path: Path):
    uri = await _opened(vscode, tmp_path / "doc.py")
    texts = ["import torch\n" + "(" * 5000 + "\n", "import torch\x00\n", "import torch\ndef (\n",
             "import torch\n\udcff = 1\n", "torch" * 20000, "import torch\nx = '''\n",
             "import torch\r\nloss.item().backward()\r\n\x0c\r\n"]
    for version, text in enumerate(texts, 2):
        vscode.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))
        _save(vscode, uri)
        got = await _published(vscode, uri)
        assert got.version == version
        assert all(d.code == "GT000" for d in got.diagnostics[:1]) or version == len(texts) + 1
        await _actions(vscode, uri, 1)
        await _actions(vscode, uri, 0, [types.CodeActionKind.SourceFixAll])
    assert not [m for m in vscode.messages if "internal error" in m.message]


@MODULE
async def test_pull_client_is_offered_pull_only_in_its_encoding(neovim: LanguageClient,
                                                                tmp_path: Path):
    assert neovim.init_result.capabilities.diagnostic_provider.identifier == "gradtrace"
    assert neovim.init_result.capabilities.position_encoding == "utf-8"
    uri = (tmp_path / "doc.py").as_uri()
    _open(neovim, uri, DOC)
    report = await neovim.text_document_diagnostic_async(types.DocumentDiagnosticParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    assert report.kind == "full" and sorted(d.code for d in report.items) == ["GT101", "GT407"]
    d = next(d for d in report.items if d.code == "GT101")
    assert d.range.start.character == GT101_COL["utf-8"]
    again = await neovim.text_document_diagnostic_async(types.DocumentDiagnosticParams(
        text_document=types.TextDocumentIdentifier(uri=uri), previous_result_id=report.result_id))
    assert again.kind == "unchanged"
    _change(neovim, uri, 2, 3, "\n")
    report = await neovim.text_document_diagnostic_async(types.DocumentDiagnosticParams(
        text_document=types.TextDocumentIdentifier(uri=uri), previous_result_id=report.result_id))
    assert report.kind == "full" and [d.code for d in report.items] == ["GT101"]
    (fix_all,) = await _actions(neovim, uri, 0, [types.CodeActionKind.SourceFixAll])
    assert fix_all.edit.changes[uri][0].new_text == ""               # `.item()` removed
    assert uri not in neovim.diagnostics                                # nothing was pushed


CRASHING = [sys.executable, "-c", (
    "import gradtrace.lint.registry as r, sys\n"
    "rule = next(c for c in r.all_rules() if c.code == 'GT101')\n"
    "def boom(self, node, ctx):\n"
    "    raise RuntimeError('boom')\n"
    "rule.visit_Call = boom\n"
    "import gradtrace.lsp.convert as c\n"
    "c.comment_lines = lambda text: 1 / 0\n"
    "from gradtrace.cli import main\n"
    "sys.exit(main(['server']))\n")]


@pytest_lsp.fixture(config=ClientServerConfig(CRASHING, client_factory=_client))
async def crashing(lsp_client: LanguageClient):
    await _start(lsp_client, "visual-studio-code")
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio
async def test_a_crashing_rule_is_told_once_and_an_internal_error_kills_nothing(
        crashing: LanguageClient, tmp_path: Path):
    uri = (tmp_path / "doc.py").as_uri()
    _open(crashing, uri, DOC)
    got = await _published(crashing, uri)
    assert "GT407" in [d.code for d in got.diagnostics]
    _save(crashing, uri)
    await _published(crashing, uri)
    told = [m for m in crashing.messages if "GT101" in m.message]
    assert len(told) == 1 and "boom" in told[0].message
    assert told[0].type == types.MessageType.Error
    # an exception in the server's own code: the request answers nothing, the server goes on
    assert not await _actions(crashing, uri, 3)
    assert not await _actions(crashing, uri, 3)
    told = [m for m in crashing.messages if "internal error" in m.message]
    assert len(told) == 1 and "ZeroDivisionError" in told[0].message
    _save(crashing, uri)
    assert "GT407" in [d.code for d in (await _published(crashing, uri)).diagnostics]


def test_importing_gradtrace_never_imports_pygls_and_a_missing_pygls_is_a_clear_error(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture):
    import subprocess

    code = ("import sys, gradtrace, gradtrace.cli, gradtrace.lint, gradtrace.lsp\n"
            "gradtrace.cli.build_parser()\n"
            "assert not {'pygls', 'lsprotocol'} & set(sys.modules), 'pygls imported'\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True)
    assert r.returncode == 0, r.stderr
    from gradtrace.cli import main

    monkeypatch.setitem(sys.modules, "pygls", None)
    assert main(["server"]) == 2
    assert "pip install 'gradtrace[server]'" in capsys.readouterr().err
