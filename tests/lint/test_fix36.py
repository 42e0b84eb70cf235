"""Session 36 (fix36): the false alarms session 35's unseen projects left (docs/triage/fix36.md),
each in another spelling than the project's, next to a buggy twin that is still reported. Every
snippet runs on real torch."""
from __future__ import annotations

import pytest

from imports_as_found import imports_as_found
from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import warnings
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # In-Time-Over-Parameterization / sparse_learning (NVIDIA's ImageNet `main.py`): the step
    # closure calls a callee handed in as a parameter on the wrapped batch; the function's
    # calls pass a module whose `forward` runs a model it holds and returns its loss (NOTE
    # [passed callees]), whatever the parameter is named. Twin: the calls pass a torch loss:
    # the criterion is given the input, backward has no graph
    "parameter-callee-passed-a-module-that-runs-its-model": (Shape("""
        from torch.autograd import Variable
        class Wrapped(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(3, 2)
                self.crit = nn.CrossEntropyLoss()
            def forward(self, x, y):
                return self.crit(self.net(x), y)
        def make_step(loss_fn, optimizer):
            def _step(inp, target):
                loss = loss_fn(Variable(inp), target)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                return loss.item()
            return _step
        w = Wrapped()
        step = make_step(w, torch.optim.SGD(w.parameters(), lr=0.1))
        w0 = w.net.weight.clone()
        step(torch.randn(4, 3), torch.tensor([0, 1, 0, 1]))
        """, "GT104", holds="not torch.equal(w0, w.net.weight)"), Shape("""
        from torch.autograd import Variable
        net = nn.Linear(3, 3)
        def make_step(loss_fn, optimizer):
            def _step(inp, target):
                loss = loss_fn(Variable(inp), target)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                return loss.item()
            return _step
        step = make_step(nn.CrossEntropyLoss(), torch.optim.SGD(net.parameters(), lr=0.1))
        step(torch.randn(4, 3), torch.tensor([0, 1, 0, 1]))
        """, "GT104", line=5, raises=(RuntimeError, "does not require grad"))),
    # MARLlib (RLlib's action masking, `base_mlp.py`, `base_rnn.py`): a module's `forward` gets
    # a record whose `["obs"]["obs"]` field, cast and kept on `self`, is what its layers are
    # given: the module's input; the sibling `["obs"]["action_mask"]` comes with it as data,
    # so `torch.clamp(torch.log(mask), min=...)` never passes a gradient into the log (NOTE
    # [batch siblings]). Twin: a soft mask made by a layer of the module, gated by the valid
    # actions: log(0) where an action is invalid, the clamp's zero gradient times an infinite
    # derivative is NaN in the layer's gradient
    "action-mask-read-from-the-record-beside-the-modules-input": (Shape("""
        FLOAT_MIN = -3.4e38
        class Policy(nn.Module):
            def __init__(self):
                super().__init__()
                self.p_encoder = nn.Linear(4, 8)
                self.p_branch = nn.Linear(8, 3)
            def forward(self, input_dict, state):
                flat = input_dict["obs"]["obs"].float()
                action_mask = input_dict["obs"]["action_mask"]
                inf_mask = torch.clamp(torch.log(action_mask), min=FLOAT_MIN)
                self.inputs = flat
                out = self.p_branch(torch.relu(self.p_encoder(self.inputs)))
                return out + inf_mask, state
        pol = Policy()
        opt = torch.optim.SGD(pol.parameters(), lr=0.1)
        batch = {"obs": {"obs": torch.randn(5, 4, dtype=torch.float64),
                         "action_mask": torch.tensor([[1., 0., 1.]] * 5)}}
        logits, _ = pol(batch, [])
        loss = -(F.log_softmax(logits.clamp(min=-1e4), -1)[:, 0]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        ok = all(torch.isfinite(p.grad).all() for p in pol.parameters())
        """, "GT754", holds="ok"), Shape("""
        FLOAT_MIN = -3.4e38
        class Policy(nn.Module):
            def __init__(self):
                super().__init__()
                self.p_encoder = nn.Linear(4, 8)
                self.p_branch = nn.Linear(8, 3)
                self.mask_head = nn.Linear(4, 3)
            def forward(self, input_dict, state):
                flat = input_dict["obs"]["obs"].float()
                action_mask = torch.sigmoid(self.mask_head(flat)) * input_dict["obs"]["valid"]
                inf_mask = torch.clamp(torch.log(action_mask), min=FLOAT_MIN)
                self.inputs = flat
                out = self.p_branch(torch.relu(self.p_encoder(self.inputs)))
                return out + inf_mask, state
        pol = Policy()
        opt = torch.optim.SGD(pol.parameters(), lr=0.1)
        batch = {"obs": {"obs": torch.randn(5, 4, dtype=torch.float64),
                         "valid": torch.tensor([[1., 0., 1.]] * 5)}}
        logits, _ = pol(batch, [])
        loss = -(F.log_softmax(logits.clamp(min=-1e4), -1)[:, 0]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        nan = any(torch.isnan(p.grad).any() for p in pol.mask_head.parameters())
        """, "GT754", line=11, holds="nan")),
    # S2M2 (`methods/meta_template.py`): `set_forward_adaptation` asserts its flag true, then
    # calls `self.parse_feature(x, is_feature)`, whose `if is_feature:` arm returns the given
    # features (`Variable(x)`: no history); only the other arm runs the feature extractor.
    # The probe's loop backwards its own graph on every pass (NOTE [asserted flags]). Twin:
    # the flag asserted false: the extractor's graph is made once and freed by the first pass
    "flag-asserted-before-the-call-selects-the-helpers-graph-free-arm": (Shape("""
        from torch.autograd import Variable
        class Meta(nn.Module):
            def __init__(self):
                super().__init__()
                self.feature = nn.Linear(4, 4)
                self.n_support = 2
            def parse_feature(self, x, is_feature):
                x = Variable(x)
                if is_feature:
                    z_all = x
                else:
                    z_all = self.feature.forward(x)
                z_support = z_all[:, :self.n_support]
                z_query = z_all[:, self.n_support:]
                return z_support, z_query
            def adapt(self, x, is_feature=True):
                assert is_feature == True, "the features are fixed"
                z_support, z_query = self.parse_feature(x, is_feature)
                clf = nn.Linear(4, 2)
                opt = torch.optim.SGD(clf.parameters(), lr=0.01)
                y = torch.tensor([0, 0, 1, 1])
                for epoch in range(3):
                    opt.zero_grad()
                    loss = F.cross_entropy(clf(z_support.reshape(-1, 4)), y)
                    loss.backward()
                    opt.step()
                return clf(z_query)
        m = Meta()
        out = m.adapt(torch.randn(2, 5, 4), True)
        """, "GT507", holds="out.shape == (2, 3, 2)"), Shape("""
        from torch.autograd import Variable
        class Meta(nn.Module):
            def __init__(self):
                super().__init__()
                self.feature = nn.Linear(4, 4)
                self.n_support = 2
            def parse_feature(self, x, is_feature):
                x = Variable(x)
                if is_feature:
                    z_all = x
                else:
                    z_all = self.feature.forward(x)
                z_support = z_all[:, :self.n_support]
                z_query = z_all[:, self.n_support:]
                return z_support, z_query
            def adapt(self, x, is_feature=True):
                assert is_feature == False, "the features are fixed"
                z_support, z_query = self.parse_feature(x, is_feature)
                clf = nn.Linear(4, 2)
                opt = torch.optim.SGD(clf.parameters(), lr=0.01)
                y = torch.tensor([0, 0, 1, 1])
                for epoch in range(3):
                    opt.zero_grad()
                    loss = F.cross_entropy(clf(z_support.reshape(-1, 4)), y)
                    loss.backward()
                    opt.step()
                return clf(z_query)
        m = Meta()
        out = m.adapt(torch.randn(2, 5, 4), False)
        """, "GT507", line=18, raises=(RuntimeError, "backward through the graph a second time"))),
    # LightZero (`world_model_multitask.py`): `self.moe_instances = {}` is a cache that
    # `get_moe(name)` fills and returns; every call's result is handed to `_create_head_moe
    # (..., moe=...)`, which builds it into the `nn.Sequential` of the head it returns, stored
    # on `self`: each entry is registered through the head. Twin: the entries are only called
    # from `forward`: held by the plain dict alone, they are in no `parameters()`
    "cache-of-experts-each-built-into-a-registered-head": (Shape("""
        class World(nn.Module):
            def __init__(self):
                super().__init__()
                self.experts = {}
                self.head_a = self._make_head(2, moe=self.get_expert("a"))
                self.head_b = self._make_head(3, moe=self.get_expert("b"))
            def get_expert(self, name):
                if name not in self.experts:
                    self.experts[name] = nn.Linear(4, 4)
                return self.experts[name]
            def _make_head(self, out_dim, moe=None):
                modules = [nn.LayerNorm(4), moe, nn.Linear(4, out_dim)]
                return nn.Sequential(*modules)
            def forward(self, x):
                return self.head_a(x).sum() + self.head_b(x).sum()
        w = World()
        ok = all(any(p is q for q in w.parameters()) for p in w.experts["a"].parameters())
        """, "GT401", holds="ok"), Shape("""
        class World(nn.Module):
            def __init__(self):
                super().__init__()
                self.experts = {}
                self.head_a = nn.Linear(4, 2)
            def get_expert(self, name):
                if name not in self.experts:
                    self.experts[name] = nn.Linear(4, 4)
                return self.experts[name]
            def forward(self, x):
                return self.head_a(self.get_expert("a")(x)).sum()
        w = World()
        w(torch.randn(2, 4))
        lost = not any(any(p is q for q in w.parameters()) for p in w.experts["a"].parameters())
        """, "GT401", line=4, holds="lost")),
    # NVIDIA's ImageNet `main.py` itself: the wrapper's model comes from a factory the file
    # does not define and its criterion from a class given to the constructor; `forward` hands
    # what the first held callable returns to the second (a model, then its loss); `train`
    # passes its own parameter on to `get_train_step` (NOTE [passed callees]). Twin: `train` is
    # given the criterion itself, called on the wrapped batch: backward has no graph
    "wrapper-of-a-built-model-passed-through-two-functions": (Shape("""
        from torch.autograd import Variable
        class ModelAndLoss(nn.Module):
            def __init__(self, arch, loss):
                super().__init__()
                self.model = getattr(nn, arch)(3, 2)
                self.loss = loss()
            def forward(self, data, target):
                output = self.model(data)
                loss = self.loss(output, target)
                return loss, output
        def get_train_step(model_and_loss, optimizer):
            def _step(inp, target):
                loss, output = model_and_loss(Variable(inp), target)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                return loss.item()
            return _step
        def train(batches, model_and_loss, optimizer):
            step = get_train_step(model_and_loss, optimizer)
            return [step(x, y) for x, y in batches]
        mal = ModelAndLoss("Linear", nn.CrossEntropyLoss)
        opt = torch.optim.SGD(mal.parameters(), lr=0.1)
        w0 = mal.model.weight.clone()
        train([(torch.randn(4, 3), torch.tensor([0, 1, 0, 1]))], mal, opt)
        """, "GT104", holds="not torch.equal(w0, mal.model.weight)"), Shape("""
        from torch.autograd import Variable
        def get_train_step(model_and_loss, optimizer):
            def _step(inp, target):
                loss = model_and_loss(Variable(inp), target)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                return loss.item()
            return _step
        def train(batches, model_and_loss, optimizer):
            step = get_train_step(model_and_loss, optimizer)
            return [step(x, y) for x, y in batches]
        net = nn.Linear(3, 3)
        train([(torch.randn(4, 3), torch.tensor([0, 1, 0, 1]))], nn.CrossEntropyLoss(),
              torch.optim.SGD(net.parameters(), lr=0.1))
        """, "GT104", line=4, raises=(RuntimeError, "does not require grad"))),
    # LLMRec (MMSSL `main.py`): the softmax of data plus Gumbel noise scaled by a command-line
    # option (`args.log_log_scale`, an argparse namespace), then `+=`: no input has history,
    # the softmax saves nothing autograd reads (NOTE [parsed options]). Twin: the scale is a
    # learnable parameter: the softmax is on the graph and backward raises
    "softmax-of-data-and-noise-scaled-by-an-option-written-in-place": (Shape("""
        import argparse
        import numpy as np
        parser = argparse.ArgumentParser()
        parser.add_argument("--scale", type=float, default=1e-5)
        parser.add_argument("--tau", type=float, default=0.5)
        args = parser.parse_args([])
        disc = nn.Linear(4, 1)
        opt = torch.optim.SGD(disc.parameters(), lr=0.1)
        def step(raw, sim):
            ui = torch.tensor(raw)
            noise = torch.empty(ui.shape).uniform_(0, 1)
            logits = ui - args.scale * torch.log(-torch.log(noise + 1e-8) + 1e-8)
            p = F.softmax(logits / args.tau, dim=1)
            p += sim.detach() * 0.1
            loss = disc(p).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        step(np.random.rand(3, 4).astype(np.float32), torch.rand(3, 4))
        """, "GT602"), Shape("""
        import argparse
        import numpy as np
        parser = argparse.ArgumentParser()
        parser.add_argument("--tau", type=float, default=0.5)
        args = parser.parse_args([])
        disc = nn.Linear(4, 1)
        scale = nn.Parameter(torch.tensor(1e-5))
        opt = torch.optim.SGD([scale, *disc.parameters()], lr=0.1)
        def step(raw, sim):
            ui = torch.tensor(raw)
            noise = torch.empty(ui.shape).uniform_(0, 1)
            logits = ui - scale * torch.log(-torch.log(noise + 1e-8) + 1e-8)
            p = F.softmax(logits / args.tau, dim=1)
            p += sim.detach() * 0.1
            loss = disc(p).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        step(np.random.rand(3, 4).astype(np.float32), torch.rand(3, 4))
        """, "GT602", line=14, raises=(RuntimeError, "modified by an inplace operation"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


# --- facts from another file of the project (small projects in tmp_path) ----------------------

def _project(root, files: dict[str, str]):
    import textwrap
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def _found(root, *codes: str) -> list[tuple[str, str, int]]:
    from pathlib import Path

    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    got = check_paths([str(root)], Settings()).findings
    return sorted((f.code, Path(f.path).name, f.line) for f in got if f.code in codes)


def _run(root, script: str) -> dict:
    import runpy
    with imports_as_found(root):  # the project's `utility`, `helpers` are gone afterwards
        return runpy.run_path(str(root / script), run_name="__main__")


OPTIONS = '''
import argparse


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=1e-5)
    parser.add_argument("--tau", type=float, default=0.5)
    return parser.parse_args([])
'''
MAIN = '''
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from utility.options import parse_args

args = parse_args()
{extra}
disc = nn.Linear(4, 1)
opt = torch.optim.SGD(disc.parameters(), lr=0.1)


def step(raw, sim):
    ui = torch.tensor(raw)
    noise = torch.empty(ui.shape).uniform_(0, 1)
    logits = ui - args.scale * torch.log(-torch.log(noise + 1e-8) + 1e-8)
    p = F.softmax(logits / args.tau, dim=1)
    p += sim.detach() * 0.1
    loss = disc(p).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()


if __name__ == "__main__":
    step(np.random.rand(3, 4).astype(np.float32), torch.rand(3, 4))
'''


def test_options_parsed_by_a_function_of_another_file_carry_no_graph(tmp_path) -> None:
    """LLMRec's shape across files (NOTE [parsed options]): `args = parse_args()` of
    `utility/options.py`; silent, and it trains."""
    root = _project(tmp_path, {"utility/__init__.py": "", "utility/options.py": OPTIONS,
                               "main.py": MAIN.format(extra="")})
    assert _found(root, "GT602") == []
    _run(root, "main.py")


def test_an_option_the_file_sets_to_a_parameter_is_not_a_parsed_value(tmp_path) -> None:
    """Twin: the file replaces the option by a learnable scale: the softmax is on the graph and
    its saved output is written in place."""
    root = _project(tmp_path, {
        "utility/__init__.py": "", "utility/options.py": OPTIONS,
        "main.py": MAIN.format(extra="args.scale = nn.Parameter(torch.tensor(1e-5))\n")
        .replace("disc.parameters()", "[args.scale, *disc.parameters()]")})
    assert _found(root, "GT602") == [("GT602", "main.py", 19)]
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        _run(root, "main.py")
