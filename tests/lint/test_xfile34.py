"""The reverse project index (NOTE [reverse index]): facts a caller in another file decides,
session 34. Each case is a small project in tmp_path; look-alikes and buggy twins run on real
torch where the claim is about torch."""
from __future__ import annotations

import runpy
import sys
import textwrap
from pathlib import Path

import pytest

from gradtrace.lint import check_paths
from gradtrace.lint.config import Settings


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def found(root: Path, code: str) -> list[tuple[str, int]]:
    got = check_paths([str(root)], Settings()).findings
    return sorted((Path(f.path).name, f.line) for f in got if f.code == code)


def run(root: Path, script: str, packages: tuple[str, ...]) -> dict:
    """Run ``script`` of the project on real torch; its globals (the grad mode it sets is
    put back: it is the process's)."""
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(root))
    mode = torch.is_grad_enabled()
    try:
        return runpy.run_path(str(root / script), run_name="__main__")
    finally:
        torch.set_grad_enabled(mode)
        sys.path.remove(str(root))
        for m in list(sys.modules):
            if m.split(".")[0] in packages:
                sys.modules.pop(m, None)


# pprp's libfacedetection (NOTE [grad off by the callers]): a conv+bn block folds itself into
# a fresh conv by slice writes into the new layer's Parameters; the model's export method
# calls it, and the only caller of that, in another file, runs after
# `torch.set_grad_enabled(False)`.
NET = """
    import torch
    from torch import nn


    class ConvBN(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.conv = nn.Conv2d(cin, cout, 3, padding=1)
            self.bn = nn.BatchNorm2d(cout)

        def forward(self, x):
            return torch.relu(self.bn(self.conv(x)))

        def fuse(self):
            out = nn.Conv2d(self.conv.in_channels, self.conv.out_channels, 3, padding=1)
            scale = self.bn.weight / torch.sqrt(self.bn.running_var + self.bn.eps)
            out.bias[:] = (self.conv.bias - self.bn.running_mean) * scale + self.bn.bias
            out.weight[:] = self.conv.weight * scale[:, None, None, None]
            return out


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([ConvBN(3, 4), ConvBN(4, 4)])

        def forward(self, x):
            for b in self.blocks:
                x = b(x)
            return x

        def export(self):
            return [b.fuse() for b in self.blocks]
    """
EXPORT = """
    import torch
    from net import Net

    if __name__ == "__main__":
        {off}
        net = Net()
        net.eval()
        layers = net.export()
    """
FUSE_LINE = 17  # `out.bias[:] = ...` of NET


def test_a_method_only_run_after_the_export_scripts_grad_off_is_silent(tmp_path):
    root = write(tmp_path, {"net.py": NET,
                            "export.py": EXPORT.format(off="torch.set_grad_enabled(False)")})
    assert found(root, "GT302") == []
    run(root, "export.py", ("net",))


def test_the_same_export_with_grad_on_is_found(tmp_path):
    root = write(tmp_path, {"net.py": NET, "export.py": EXPORT.format(off="pass")})
    assert found(root, "GT302") == [("net.py", FUSE_LINE), ("net.py", FUSE_LINE + 1)]
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        run(root, "export.py", ("net",))


def test_grad_turned_on_again_before_the_call_is_found(tmp_path):
    off = "torch.set_grad_enabled(False)\n    torch.set_grad_enabled(True)"
    root = write(tmp_path, {"net.py": NET, "export.py": EXPORT.format(off=off)})
    assert found(root, "GT302") == [("net.py", FUSE_LINE), ("net.py", FUSE_LINE + 1)]


def test_a_second_caller_with_grad_on_is_found(tmp_path):
    other = """
        from net import Net


        def dump(path):
            net = Net()
            return net.export()
        """
    root = write(tmp_path, {"net.py": NET, "other.py": other,
                            "export.py": EXPORT.format(off="torch.set_grad_enabled(False)")})
    assert found(root, "GT302") == [("net.py", FUSE_LINE), ("net.py", FUSE_LINE + 1)]


def test_a_caller_under_no_grad_in_another_function_is_silent(tmp_path):
    other = """
        import torch
        from net import Net


        def export(net):
            return net.export()


        def main():
            net = Net()
            with torch.no_grad():
                return export(net)
        """
    root = write(tmp_path, {"net.py": NET, "other.py": other})
    assert found(root, "GT302") == []


def test_a_caller_added_in_a_file_that_never_named_it_refreshes_the_cache(
        tmp_path, monkeypatch, capsys):
    from gradtrace.cli import main
    root = write(tmp_path, {"net.py": NET,
                            "export.py": EXPORT.format(off="torch.set_grad_enabled(False)"),
                            "other.py": "import torch\n"})
    monkeypatch.chdir(root)
    monkeypatch.delenv("GRADTRACE_NO_CACHE", raising=False)
    monkeypatch.delenv("GRADTRACE_CACHE_DIR", raising=False)

    def codes() -> int:
        main(["check", "--jobs", "1", "--format", "json", "--exit-zero", "."])
        return capsys.readouterr().out.count('"GT302"')

    assert codes() == 0
    assert codes() == 0  # answered from the cache
    packs = list((root / ".gradtrace_cache").rglob("*.json"))
    assert any('"<search>' in p.read_text() for p in packs)  # the search is a dependency
    (root / "other.py").write_text("from net import Net\n\n\ndef dump():\n"
                                   "    return Net().export()\n")
    assert codes() == 2  # net.py's search finds a new caller: checked again
    (root / "other.py").write_text("import torch\n")
    assert codes() == 0


def test_the_reverse_index_gives_each_call_its_file_arguments_and_grad_mode(tmp_path):
    from gradtrace.lint.analysis.callers import foreign_sites
    from gradtrace.lint.analysis.project_files import _load, set_roots, use
    helper = """
        import torch


        def kl(ref, pred):
            return (ref.softmax(-1) * (ref.log_softmax(-1) - pred.log_softmax(-1))).sum()
        """
    train = """
        import torch
        from helper import kl


        def step(model, x, ref):
            loss = kl(ref.detach(), model(x))
            with torch.no_grad():
                val = kl(ref, model(x))
            return loss, val


        if __name__ == "__main__":
            torch.set_grad_enabled(False)
            ref = torch.randn(3)
            ref.eval()
            kl(ref, ref)
        """
    root = write(tmp_path, {"helper.py": helper, "train.py": train})
    set_roots([str(root)])
    f = _load(str((root / "helper.py").resolve()), 0)
    assert f is not None
    ctx = use(f)
    sites = foreign_sites(ctx, ctx.analysis.functions["kl"])
    assert sites is not None
    got = [(Path(s.ctx.path).name, s.call.lineno, s.off, s.in_eval, type(s.stmt).__name__,
            s.ctx.source(s.ctx.analysis.arguments(ctx.analysis.functions["kl"], s.call)["ref"]))
           for s in sites]
    assert got == [("train.py", 6, False, False, "Assign", "ref.detach()"),
                   ("train.py", 8, True, False, "Assign", "ref"),
                   ("train.py", 16, True, True, "Expr", "ref")]


# EasyEdit's DINM (NOTE [argument roles by the callers]): `kl_loc_loss(pre, post)` takes the
# pre-edit reference first; the trainers of the package detach it at every call. DINM's call
# detaches it too, and its term trains nothing because `post` is computed under `no_grad`:
# the detach is not the cut to blame.
KL = """
    def kl_loc_loss(pre, post):
        return (pre.softmax(-1) * (pre.log_softmax(-1) - post.log_softmax(-1))).sum(-1).mean()
    """
TRAINER = """
    from .losses import kl_loc_loss


    def edit_step(model, opt, x, x_loc):
        base = model(x_loc)
        l_loc = kl_loc_loss({first}, {second})
        (model(x).pow(2).mean() + l_loc).backward()
        opt.step()


    def eval_step(model, x):
        base = model(x)
        return kl_loc_loss({first}, {second}).item()
    """
DINM = """
    import torch
    from torch import nn
    from editor import kl_loc_loss

    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, x_loc = torch.randn(8, 4), torch.randn(8, 4)
    base = 2 * model(x_loc)  # the reference: another model's logits in DINM
    opt.zero_grad()
    l_edit = model(x).pow(2).mean()
    {post}
    l_loc = kl_loc_loss(base.detach(), post)
    (l_edit + l_loc).backward()
    g_loc = model.weight.grad.clone()
    opt.zero_grad()
    model(x).pow(2).mean().backward()
    """
NO_GRAD_POST = "with torch.no_grad():\n        post = model(x_loc)"
KL_LINE = 14  # `l_loc = kl_loc_loss(...)` of DINM


def _editor(tmp_path, first, second, post=NO_GRAD_POST, trainer=TRAINER):
    return write(tmp_path, {
        "editor/__init__.py": "from .trainer import *\n", "editor/losses.py": KL,
        "editor/trainer.py": trainer.format(first=first, second=second),
        "dinm.py": DINM.format(post=post)})


def test_a_detach_every_other_caller_writes_for_the_reference_is_silent(tmp_path):
    root = _editor(tmp_path, "base.detach()", "model(x_loc)")
    assert found(root, "GT107") == []
    g = run(root, "dinm.py", ("editor",))
    assert torch_equal(g["g_loc"], g["model"].weight.grad)  # the term trains nothing...
    fixed = _editor(tmp_path / "fixed", "base.detach()", "model(x_loc)", "post = model(x_loc)")
    g = run(fixed, "dinm.py", ("editor",))
    assert not torch_equal(g["g_loc"], g["model"].weight.grad)  # ...until `post` has a graph


def test_a_detach_where_the_other_callers_pass_the_prediction_is_found(tmp_path):
    root = _editor(tmp_path, "model(x_loc)", "base.detach()")
    assert found(root, "GT107") == [("dinm.py", KL_LINE)]


def test_a_detach_with_one_other_caller_only_is_found(tmp_path):
    one = TRAINER[:TRAINER.index("    def eval_step")]
    root = _editor(tmp_path, "base.detach()", "model(x_loc)", trainer=one)
    assert found(root, "GT107") == [("dinm.py", KL_LINE)]


def torch_equal(a, b) -> bool:
    import torch
    return bool(torch.equal(a, b))


def test_a_caller_handed_the_instance_without_naming_its_class_is_found(tmp_path):
    other = """
        def dump(model):
            return model.export()
        """
    root = write(tmp_path, {"net.py": NET, "tools.py": other,
                            "export.py": EXPORT.format(off="torch.set_grad_enabled(False)")})
    assert found(root, "GT302") == [("net.py", FUSE_LINE), ("net.py", FUSE_LINE + 1)]
