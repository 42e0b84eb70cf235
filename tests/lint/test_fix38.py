"""Session 38 (fix38): false alarms sessions 35-37's unseen projects left (docs/triage/fix38.md),
each in another spelling than the project's, next to a buggy twin that is still reported. Every
snippet runs on real torch. Facts that need the project (every caller, other files included)
are checked on small projects in ``tmp_path``."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")


def _project(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def _found(root: Path, *codes: str) -> list[tuple[str, str, int]]:
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    got = check_paths([str(root)], Settings()).findings
    return sorted((f.code, Path(f.path).name, f.line) for f in got if f.code in codes)


def _run(root: Path, script: str, modules: tuple[str, ...]) -> dict:
    import runpy
    import sys
    sys.path.insert(0, str(root))
    try:
        return runpy.run_path(str(root / script), run_name="__main__")
    finally:
        sys.path.remove(str(root))
        for m in list(sys.modules):
            if m.split(".")[0] in modules:
                sys.modules.pop(m, None)


# -- GT751: predictions unpacked from a tuple under no_grad (RAD-NeRF's shape) -----------------
# A tuple unpacked under `torch.no_grad()` holds no graph, as a name bound there does; a
# resampling's `size=(H, W)` is a shape, not a value of the graph. So the sRGB curve's only
# caller hands it data (NOTE [parameters given data]) and its discarded `**` branch is never
# differentiated. The twin also applies the curve to the training loss: NaN gradients.

_RENDER = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


def to_srgb(x):
    return torch.where(x < 0.0031308, 12.92 * x, 1.055 * x ** 0.41666 - 0.055)


class Renderer:
    def __init__(self):
        self.net = nn.Linear(3, 3)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)

    def step(self, rays):
        rgb = self.net(rays)
        return rgb, rgb.sum(-1)

    def train_step(self, rays, gt):
        rgb, depth = self.step(rays)
        loss = ((LOSS_INPUT - gt) ** 2).mean() + depth.mean() * 0.0
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss

    def render(self, rays, H, W):
        with torch.no_grad():
            rgb, depth = self.step(rays)
        img = rgb.reshape(1, 2, 2, 3).permute(0, 3, 1, 2)
        img = F.interpolate(img, size=(H, W), mode="bilinear").permute(0, 2, 3, 1)
        return to_srgb(img).cpu().numpy()
'''

_RENDER_MAIN = '''
import torch
from render import Renderer

torch.manual_seed(0)
r = Renderer()
rays, gt = torch.randn(4, 3), torch.rand(4, 3)
for _ in range(3):
    r.train_step(rays, gt)
image = r.render(rays, 4, 4)
finite = all(bool(torch.isfinite(p.grad).all()) for p in r.net.parameters())
'''


def test_curve_on_predictions_unpacked_under_no_grad_is_silent(tmp_path: Path) -> None:
    root = _project(tmp_path, {"render.py": _RENDER.replace("LOSS_INPUT", "rgb"),
                               "main.py": _RENDER_MAIN})
    assert _found(root, "GT751") == []
    assert _run(root, "main.py", ("render",))["finite"] is True


def test_curve_also_in_the_training_loss_is_reported(tmp_path: Path) -> None:
    root = _project(tmp_path, {"render.py": _RENDER.replace("LOSS_INPUT", "to_srgb(rgb)"),
                               "main.py": _RENDER_MAIN})
    assert _found(root, "GT751") == [("GT751", "render.py", 7)]
    assert _run(root, "main.py", ("render",))["finite"] is False


def _trace(src: str, fn_name: str, name: str, line: int) -> bool:
    import ast
    from gradtrace.lint.analysis.origins import origins
    from gradtrace.lint.context import Context
    from gradtrace.lint.names import Imports
    src = textwrap.dedent(src)
    tree = ast.parse(src)
    imports = Imports()
    for s in tree.body:
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            imports.add(s)
    ctx = Context("t.py", src, tree, imports)
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == fn_name)
    use = next(s for s in ast.walk(fn) if isinstance(s, ast.stmt) and s.lineno == line)
    return origins(ctx, fn).trace(ast.Name(name, ast.Load()), use, line).live


_UNPACK = '''
import torch

def show(model, x, H, W):
    GUARD
        out, aux = model(x)
    img = torch.nn.functional.interpolate(out, size=(H, W))
    return img
'''


def test_tuple_unpacked_under_no_grad_holds_no_graph() -> None:
    src = _UNPACK.replace("GUARD", "with torch.no_grad():")
    assert _trace(src, "show", "img", 8) is False
    assert _trace(src, "show", "aux", 8) is False


def test_tuple_unpacked_with_grad_on_holds_one() -> None:
    src = _UNPACK.replace("GUARD", "if True:")
    assert _trace(src, "show", "img", 8) is True
    assert _trace(src, "show", "aux", 8) is True
