"""The source tree's shape: no import cycle between gradtrace's modules, no module over 500 lines.

An edge A -> B is any ``import`` of B executed by A, at module level or inside a function (a
lazy import still makes A depend on B: it only moves the cycle from import time to run time).
Imports under ``if TYPE_CHECKING:`` are not edges: they never run and exist for annotations.
Importing ``pkg.mod`` names ``pkg.mod`` only (not ``pkg/__init__``), so a package whose
``__init__`` re-exports a submodule is not a cycle by itself.
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

import gradtrace
from src_trees import GROUP, tree

SRC = Path(gradtrace.__file__).resolve().parent
MAX_LINES = 500
# one xdist worker for the tests that parse src/ with ast: each file parsed once (src_trees.py)
pytestmark = pytest.mark.xdist_group(GROUP)


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"
        or isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """gradtrace modules that module ``name`` imports (nearest enclosing module of a name)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: list[str] = []
    stack: list[ast.AST] = [tree(path)]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if _is_type_checking(child):
                stack.append(ast.Module(body=child.orelse, type_ignores=[]))
                continue
            if isinstance(child, ast.Import):
                targets.extend(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join(up + [base] if base else up)
                for a in child.names:  # a submodule, else a name of the module `base`
                    full = f"{base}.{a.name}"
                    targets.append(full if full in modules else base)
            stack.append(child)
    out = set()
    for t in targets:
        while t and t not in modules:
            t = t.rpartition(".")[0]
        if t and t != name:
            out.add(t)
    return out


@functools.lru_cache(maxsize=1)
def import_graph() -> dict[str, set[str]]:
    """Module name -> the gradtrace modules it imports."""
    modules = _modules()
    return {name: _imported(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_the_graph_sees_lazy_and_relative_imports() -> None:
    graph = import_graph()
    assert "gradtrace.runtime.runner" in graph["gradtrace.cli.run"]  # inside a function
    assert "gradtrace.findings" in graph["gradtrace"]  # module level
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle_in_gradtrace() -> None:
    graph = import_graph()
    found = cycles(graph)
    detail = "\n".join(
        "cycle: " + ", ".join(c) + "\n" + "\n".join(
            f"    {m} -> {sorted(graph[m] & set(c))}" for m in c) for c in found)
    assert not found, detail


# runtime/ by product: what each part may import of the others (besides the shared core,
# the modules directly in runtime/). The composers (`gradtrace run`, `gradtrace.graph`) sit on
# top; distributed extends a tracer session; report/ renders and captures nothing.
_MAY_IMPORT = {
    "gradtrace.runtime.trace": set(),
    "gradtrace.runtime.watch": set(),
    "gradtrace.runtime.distributed": {"gradtrace.runtime.trace"},
    "gradtrace.runtime": set(),  # the core
    "gradtrace.report": set(),
}
_COMPOSERS = {"gradtrace.runtime.runner", "gradtrace.runtime.graph"}


def _part(module: str) -> str | None:
    for part in sorted(_MAY_IMPORT, key=len, reverse=True):
        if module == part or module.startswith(part + "."):
            return part
    return None


def test_runtime_products_stand_on_the_core_only() -> None:
    products = {p for p in _MAY_IMPORT if p.startswith("gradtrace.runtime.")}
    wrong = []
    for module, imported in import_graph().items():
        part = _part(module)
        if part is None or module in _COMPOSERS:
            continue
        for target in imported:
            to = _part(target)
            if part == "gradtrace.report":
                bad = to is not None and to != part
            else:
                bad = to in products and to != part and to not in _MAY_IMPORT[part] \
                    or target in _COMPOSERS
            if bad:
                wrong.append(f"{module} -> {target}")
    assert not wrong, "\n".join(sorted(wrong))


def test_no_module_over_500_lines() -> None:
    long = {str(p.relative_to(SRC.parent)): n for p in SRC.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"split these modules (over {MAX_LINES} lines): {long}"


ROOT_FILES = {".gitignore", ".pre-commit-hooks.yaml", "CHANGELOG.md", "LICENSE", "README.md",
              "pyproject.toml"}


def test_no_stray_file_at_the_repository_root() -> None:
    """Gate outputs and scratch lists belong in /tmp, not in the tracked root (sessions 45-46
    committed nine of them by mistake)."""
    import subprocess

    root = SRC.parent.parent
    try:
        out = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True,
                             timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        pytest.skip("not a git checkout")
    stray = sorted({f for f in out.splitlines() if "/" not in f} - ROOT_FILES)
    assert not stray, f"untrack or move these files: {stray}"


def _self_calling_closures(module: ast.Module) -> list[tuple[int, str]]:
    """(line, name) of every function nested in another that reads its own name."""
    out = []
    for outer in ast.walk(module):
        if not isinstance(outer, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for inner in ast.walk(outer):
            if inner is not outer and isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                    and any(isinstance(n, ast.Name) and n.id == inner.name
                            for st in inner.body for n in ast.walk(st)):
                out.append((inner.lineno, inner.name))
    return out


def test_no_recursive_closure() -> None:
    """NOTE [gc] in gradtrace.lint: a nested function calling itself is a reference cycle that
    keeps what it captures (a file's context, a user's frame) until the cyclic collector runs."""
    found = {f"{p.relative_to(SRC.parent)}:{line} {name}" for p in SRC.rglob("*.py")
             for line, name in _self_calling_closures(tree(p))}
    assert not found, sorted(found)
    bad = ast.parse("def f(t):\n    def go(n):\n        return go(n - 1) if n else t\n"
                    "    return go(3)\n")
    assert _self_calling_closures(bad) == [(2, "go")]
