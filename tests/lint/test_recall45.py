"""Session 45, helper recall45: static facts across a call (a helper one call away does the
cut; a dict of outputs or of loss terms). Each fact: a buggy twin reported on the cause's line
and a silent look-alike."""
from __future__ import annotations

import textwrap
from pathlib import Path

from gradtrace.lint import check_paths, check_source
from gradtrace.lint.config import Settings


def _found(src: str, code: str) -> list[int]:
    return sorted(f.line for f in check_source(textwrap.dedent(src)) if f.code == code)


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def _project(root: Path, code: str) -> list[tuple[str, int]]:
    got = check_paths([str(root)], Settings()).findings
    return sorted((Path(f.path).name, f.line) for f in got if f.code == code)


# NOTE [own graph cut]: a method detaches the output of a model it holds; the training step
# hands it data only (the batch), so "given data, it returns data" was the old reading
OWN = '''
import torch
import torch.nn as nn


class Runner:
    def __init__(self):
        self.body = nn.Linear(6, 6)
        self.opt = torch.optim.SGD(self.body.parameters(), lr=0.1)

    def embed(self, batch):
        h = self.body(batch)
        return h.detach()

    def prep(self, batch):
        return batch.detach()

    def update(self, batch, target):
        self.opt.zero_grad()
        {line}
        loss = nn.functional.l1_loss(z, target)
        loss.backward()
        self.opt.step()


r = Runner()
r.update(torch.randn(3, 6), torch.randn(3, 6))
'''


def test_method_cuts_its_own_model_twin():
    assert _found(OWN.format(line="z = self.embed(batch)"), "GT107") == [13]


def test_method_cuts_its_argument_only_lookalike():
    assert _found(OWN.format(line="z = self.body(self.prep(batch))"), "GT107") == []


def test_method_cut_as_a_target_next_to_a_live_output_lookalike():
    src = OWN.format(line="z = self.body(batch) - self.embed(batch)")
    assert _found(src, "GT107") == []


# NOTE [project index]: a function of another file decorated `@torch.no_grad()`; the index
# read a def's text from its `def` line, without the decorator
TOOLS = '''
import torch


@torch.inference_mode()
def run_once(net, batch):
    return net(batch)
'''

MAIN = '''
import torch
import torch.nn as nn

from tools import run_once


def fit(steps):
    net = nn.Linear(5, 2)
    opt = torch.optim.Adam(net.parameters())
    for _ in range(steps):
        batch, target = torch.randn(4, 5), torch.randn(4, 2)
        opt.zero_grad()
        {line}
        loss = nn.functional.mse_loss(out, target)
        loss.backward()
        opt.step()


if __name__ == "__main__":
    fit(3)
'''


def test_decorated_helper_of_another_file_twin(tmp_path):
    root = _write(tmp_path, {"tools.py": TOOLS,
                             "main.py": MAIN.format(line="out = run_once(net, batch)")})
    got = check_paths([str(root)], Settings()).findings
    hits = [f for f in got if f.code == "GT202"]
    assert [(Path(f.path).name, f.line) for f in hits] == [("main.py", 13)]
    assert "inference_mode" in hits[0].message  # the other file's region, not the call
    assert any(Path(r.path).name == "tools.py" and r.line == 4 for r in hits[0].related)


def test_decorated_helper_of_another_file_for_a_log_lookalike(tmp_path):
    line = "out = net(batch)\n        shown = run_once(net, batch)"
    root = _write(tmp_path, {"tools.py": TOOLS, "main.py": MAIN.format(line=line)})
    assert _project(root, "GT202") == []


# NOTE [forward cuts]: `forward` runs a method of its class decorated `@torch.no_grad()`;
# the submodule that method runs never trains
TOWER = '''
import torch
import torch.nn as nn


class Tower(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv1d(2, 4, 3)
        self.top = nn.Linear(4, 1)

    @torch.no_grad()
    def features(self, x):
        return self.stem(x).mean(-1)

    def forward(self, x):
        {line}


tower = Tower()
opt = torch.optim.SGD(tower.parameters(), lr=0.01)
for _ in range(2):
    x, y = torch.randn(8, 2, 9), torch.randn(8, 1)
    opt.zero_grad()
    loss = nn.functional.mse_loss(tower(x), y)
    loss.backward()
    opt.step()
'''


def test_forward_runs_a_no_grad_method_twin():
    # at the decorator: the method runs only the layer it cuts (probes53b, as for a `with`)
    assert _found(TOWER.format(line="return self.top(self.features(x))"), "GT115") == [12]


def test_forward_runs_the_stem_itself_lookalike():
    src = TOWER.format(line="return self.top(self.stem(x).mean(-1))")
    assert _found(src, "GT115") == []


# NOTE [returned dict entry] + NOTE [summed dict of terms] + a helper returning one tensor
# on one path and a tuple on the other (NOTE [unpacked cut element])
WARP = '''
import torch
import torch.nn as nn


def warp(grid, points, detail=False):
    attn = torch.softmax(-torch.cdist(points, grid), dim=-1)
    attn = {cut}
    moved = torch.matmul(attn, grid)
    if detail:
        return moved, attn
    return moved


class Warper(nn.Module):
    def __init__(self):
        super().__init__()
        self.make = nn.Linear(2, 2)

    def forward(self, seeds, points):
        grid = self.make(seeds)
        moved, attn = warp(grid, points, detail=True)
        return {{"moved": moved, "attn": attn}}


net = Warper()
opt = torch.optim.Adam(net.parameters())
for _ in range(3):
    seeds, points, goal = torch.randn(4, 7, 2), torch.randn(4, 9, 2), torch.randn(4, 9, 2)
    res = net(seeds, points)
    parts = {{"fit": (res["moved"] - goal).abs().mean()}}
    parts["spread"] = res["attn"].pow(2).sum(-1).mean() * 0.1
    total = sum(parts.values())
    opt.zero_grad()
    total.backward()
    opt.step()
'''


def test_dict_entry_cut_in_a_summed_dict_of_terms_twin():
    assert _found(WARP.format(cut="attn.detach()"), "GT107") == [8]


def test_dict_entry_live_lookalike():
    assert _found(WARP.format(cut="attn * 1.0"), "GT107") == []


def test_dict_of_terms_with_a_key_stored_twice_lookalike():
    src = WARP.format(cut="attn.detach()").replace(
        "    total = sum(", '    parts["spread"] = res["moved"].pow(2).mean()\n    total = sum(')
    assert _found(src, "GT107") == []


# NOTE [helper cuts]: `@staticmethod` / `@classmethod` say how a helper is bound, not what
# it computes; a helper so decorated was left out as "decorated"
SCORE = '''
import torch
import torch.nn as nn


class Scorer(nn.Module):
    @staticmethod
    def _rows(t):
        return {body}

    def forward(self, guess, target):
        return (self._rows(guess) - target.flatten(1)).abs().mean()


tiny = nn.Linear(3, 3)
judge = Scorer()
opt = torch.optim.SGD(tiny.parameters(), lr=0.1)
for _ in range(2):
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    opt.zero_grad()
    loss = judge(tiny(a), b)
    loss.backward()
    opt.step()
'''


def test_static_helper_cuts_twin():
    assert _found(SCORE.format(body="t.flatten(1).detach()"), "GT107") == [9]


def test_static_helper_keeps_the_graph_lookalike():
    assert _found(SCORE.format(body="t.flatten(1)"), "GT107") == []


NOGRAD_STATIC = '''
import torch
import torch.nn as nn


class Kit:
    @staticmethod
    @torch.no_grad()
    def {name}(net, x):
        return net(x)


net = nn.Linear(3, 3)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(2):
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    opt.zero_grad()
    {line}
    loss.backward()
    opt.step()
'''


def test_static_no_grad_helper_twin():
    src = NOGRAD_STATIC.format(
        name="run", line="loss = nn.functional.mse_loss(Kit.run(net, x), y)")
    assert _found(src, "GT202") == [8]


def test_static_no_grad_helper_for_a_log_lookalike():
    src = NOGRAD_STATIC.format(
        name="run", line="loss = nn.functional.mse_loss(net(x), y)\n    print(Kit.run(net, x))")
    assert _found(src, "GT202") == []


# NOTE [summed dict of terms]: a list of terms filled by `append`, summed or stacked
HEADS = '''
import torch
import torch.nn as nn


class Fan(nn.Module):
    def __init__(self):
        super().__init__()
        self.outs = nn.ModuleList(nn.Linear(4, 2) for _ in range(3))

    def forward(self, x):
        return [o(x) for o in self.outs]


net = Fan()
opt = torch.optim.Adam(net.parameters())
for _ in range(3):
    x, y = torch.randn(5, 4), torch.randn(5, 2)
    preds = net(x)
    terms = [nn.functional.smooth_l1_loss(preds[0], y)]
    for p in preds[1:]:
        terms.append(nn.functional.smooth_l1_loss({arg}, y))
    loss = {total}
    opt.zero_grad()
    loss.backward()
    opt.step()
'''


def test_appended_terms_one_cut_twin():
    for total in ("sum(terms)", "torch.stack(terms).mean()"):
        assert _found(HEADS.format(arg="p.detach()", total=total), "GT107") == [22], total


def test_appended_terms_live_lookalike():
    assert _found(HEADS.format(arg="p", total="sum(terms)"), "GT107") == []


def test_appended_terms_also_extended_lookalike():
    src = HEADS.format(arg="p.detach()", total="sum(terms)").replace(
        "    loss = sum(", "    terms.extend(preds)\n    loss = sum(")
    assert _found(src, "GT107") == []


# NOTE [project index]: a method of a class of another file, run through an instance made
# here (`enc.features(x)`) or held by `self` (`self.enc.encode(x)`, made in `__init__`)
PARTS = '''
import torch
import torch.nn as nn


class Trunk(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x)

    @torch.no_grad()
    def frozen_view(self, x):
        return self.lin(x)

    def snapshot(self, x):
        return self.lin(x).detach()

    def live_view(self, x):
        return self.lin(x) * 2
'''

USER = '''
import torch
import torch.nn as nn

from parts import Trunk


class Loop:
    def __init__(self):
        self.trunk = Trunk()
        self.opt = torch.optim.SGD(self.trunk.parameters(), lr=0.1)

    def once(self, x, y):
        self.opt.zero_grad()
        loss = nn.functional.mse_loss(self.trunk.{held}(x), y)
        loss.backward()
        self.opt.step()


def main():
    trunk = Trunk()
    opt = torch.optim.SGD(trunk.parameters(), lr=0.1)
    for _ in range(3):
        x, y = torch.randn(2, 4), torch.randn(2, 4)
        opt.zero_grad()
        loss = nn.functional.mse_loss(trunk.{local}(x), y)
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
    Loop().once(torch.randn(2, 4), torch.randn(2, 4))
'''


def test_methods_of_a_class_of_another_file_twin(tmp_path):
    root = _write(tmp_path, {"parts.py": PARTS,
                             "user.py": USER.format(held="frozen_view", local="snapshot")})
    assert _project(root, "GT202") == [("user.py", 14)]
    assert _project(root, "GT107") == [("user.py", 25)]


def test_methods_of_a_class_of_another_file_keep_the_graph_lookalike(tmp_path):
    root = _write(tmp_path, {"parts.py": PARTS,
                             "user.py": USER.format(held="live_view", local="live_view")})
    assert _project(root, "GT202") == _project(root, "GT107") == []


# NOTE [grad-off submodule]: a submodule whose class's `forward` is decorated
# `@torch.no_grad()`; the model that holds it trains everything
HOLDER = '''
import torch
import torch.nn as nn


class Lens(nn.Module):
    def __init__(self):
        super().__init__()
        {init}

    @torch.no_grad()
    def forward(self, x):
        return {body}


class Reader(nn.Module):
    def __init__(self):
        super().__init__()
        self.lens = Lens()
        self.out = nn.Linear(4, 1)

    def forward(self, x):
        return self.out(self.lens(x))


reader = Reader()
opt = torch.optim.Adam(reader.parameters())
for _ in range(3):
    x, y = torch.randn(2, 4), torch.randn(2, 1)
    opt.zero_grad()
    loss = nn.functional.mse_loss(reader(x), y)
    loss.backward()
    opt.step()
'''


def test_submodule_with_a_no_grad_forward_twin():
    src = HOLDER.format(init="self.conv = nn.Linear(4, 4)", body="self.conv(x)")
    assert _found(src, "GT115") == [11]


def test_submodule_with_a_no_grad_forward_frozen_when_built_lookalike():
    src = HOLDER.format(init="self.conv = nn.Linear(4, 4)\n        self.requires_grad_(False)",
                        body="self.conv(x)")
    assert _found(src, "GT115") == []


def test_submodule_with_a_no_grad_forward_and_no_weights_lookalike():
    src = HOLDER.format(init="self.scale = 2.0", body="x * self.scale")
    assert _found(src, "GT115") == []


# a dict comprehension's entries are its values (as a dict literal's): the keys of
# `d.items()` carry no graph into them
RENAMED = '''
import torch
import torch.nn as nn

net = nn.Linear(4, 4)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(3):
    x, y = torch.randn(2, 4), torch.randn(2, 4)
    heads = {{"main": net(x), "side": net(x) * 2}}
    heads = {{name: {value} for name, t in heads.items()}}
    loss = nn.functional.mse_loss(heads["main"], y)
    opt.zero_grad()
    loss.backward()
    opt.step()
'''


def test_dict_comprehension_of_detached_values_twin():
    assert _found(RENAMED.format(value="t.detach()"), "GT107") == [10]


def test_dict_comprehension_of_live_values_lookalike():
    assert _found(RENAMED.format(value="t.float()"), "GT107") == []


UTILS = '''
import torch


@torch.no_grad()
def pooled(net, x):
    h = net(x)
    return h, h.mean()
'''

STEP = '''
import torch
import torch.nn as nn

from utils import pooled


def run():
    net = nn.Linear(4, 4)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for _ in range(3):
        x, y = torch.randn(2, 4), torch.randn(2, 4)
        opt.zero_grad()
        h, m = {call}
        loss = nn.functional.mse_loss(h, y)
        loss.backward()
        opt.step()


if __name__ == "__main__":
    run()
'''


def test_decorated_helper_of_another_file_unpacked_twin(tmp_path):
    root = _write(tmp_path, {"utils.py": UTILS, "step.py": STEP.format(call="pooled(net, x)")})
    assert _project(root, "GT202") == [("step.py", 13)]


def test_decorated_helper_of_another_file_unpacked_lookalike(tmp_path):
    root = _write(tmp_path, {"utils.py": UTILS,
                             "step.py": STEP.format(call="net(x), pooled(net, x)[1]")})
    assert _project(root, "GT202") == []


def test_method_cuts_its_own_model_inside_a_branch_twin():
    src = OWN.format(line="z = self.embed(batch)").replace(
        "        h = self.body(batch)\n        return h.detach()",
        "        if batch.dim() > 2:\n            h = self.body(batch.flatten(1))\n"
        "            return h.detach()\n        return self.body(batch).detach()")
    assert _found(src, "GT107") == [14]
