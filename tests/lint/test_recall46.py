"""Session 46, helper recall46: static facts across calls (issue 13 part 3). Each fact: a buggy
twin reported on the cause's line and silent look-alikes."""
from __future__ import annotations

import textwrap

from gradtrace.lint import check_source


def _found(src: str, code: str) -> list[int]:
    return sorted(f.line for f in check_source(textwrap.dedent(src)) if f.code == code)


# NOTE [backward through calls]: a component leaves grad off for the thread; the training runs
# later, two calls deep, through methods of instances of classes of the file
STAGES = '''
import torch
import torch.nn as nn


class Scaler:
    def apply(self, batch):
        torch.set_grad_enabled(False)
        return batch / batch.abs().max()


def fit(net, batch, target, rounds=5):
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for _ in range(rounds):
        opt.zero_grad()
        loss = (net(batch) - target).pow(2).mean()
        loss.backward()
        opt.step()
    return loss.item()


class Trainer:
    def __init__(self, net):
        self.net = net

    {deco}
    def run(self, batch, target):
        return fit(self.net, batch, target)


def main():
    net = nn.Linear(4, 1)
    batch, target = torch.randn(8, 4), torch.randn(8, 1)
    {first}
    {second}


main()
'''

_LEAK = "batch = Scaler().apply(batch)"
_TRAIN = "print(Trainer(net).run(batch, target))"


def test_leaked_grad_off_reaches_training_through_fresh_instances():
    src = STAGES.format(deco="", first=_LEAK, second=_TRAIN)
    assert _found(src, "GT203") == [8]


def test_leaked_grad_off_reaches_training_through_held_instance():
    src = STAGES.format(deco="", first="s = Scaler()\n    batch = s.apply(batch)",
                        second="t = Trainer(net)\n    print(t.run(batch, target))")
    assert _found(src, "GT203") == [8]


def test_lookalike_training_method_turns_grad_back_on():
    for deco in ("@torch.enable_grad()", "@torch.inference_mode(False)",
                 "@torch.set_grad_enabled(True)"):
        src = STAGES.format(deco=deco, first=_LEAK, second=_TRAIN)
        assert _found(src, "GT203") == [], deco


def test_lookalike_training_runs_before_the_leak():
    src = STAGES.format(deco="", first=_TRAIN, second=_LEAK)
    assert _found(src, "GT203") == []


def test_lookalike_training_only_in_a_callback_never_called():
    src = STAGES.replace(
        "        return fit(self.net, batch, target)",
        "        def later():\n            return fit(self.net, batch, target)\n"
        "        return later").format(deco="", first=_LEAK, second=_TRAIN)
    assert _found(src, "GT203") == []


def test_lookalike_no_training_reached():
    src = STAGES.replace("        loss.backward()\n", "").format(
        deco="", first=_LEAK, second=_TRAIN)
    assert _found(src, "GT203") == []


# NOTE [marked by the caller]: a caller marks a tensor of the object it hands in as requiring
# grad; the callee converts that tensor with NumPy
MARKED = '''
from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class Frame:
    coords: torch.Tensor
    box: torch.Tensor


class Scorer(torch.nn.Module):
    def forward(self, frame):
        pts = frame.coords.cpu().{conv}
        return torch.tensor(float(np.abs(pts).sum()))


def relax(frame, scorer, steps=3):
    {before}
    out = scorer(frame)
    {after}
    return out


def main():
    frame = Frame(torch.randn(5, 3), torch.eye(3))
    scorer = Scorer()
    print(relax(frame, scorer))


if __name__ == "__main__":
    main()
'''


def _marked(conv="numpy()", before="frame.coords.requires_grad_(True)", after="pass"):
    return _found(MARKED.format(conv=conv, before=before, after=after), "GT116")


def test_caller_marks_attribute_of_passed_object():
    assert _marked() == [16]
    assert _marked(before="frame.coords.requires_grad = True") == [16]


def test_lookalike_marked_object_detached_before_numpy():
    assert _marked(conv="detach().numpy()") == []


def test_lookalike_mark_after_the_call():
    assert _marked(before="pass", after="frame.coords.requires_grad_(True)") == []


def test_lookalike_other_attribute_marked():
    assert _marked(before="frame.box.requires_grad_(True)") == []


def test_lookalike_mark_only_on_one_arm():
    assert _marked(before="if steps > 5:\n        frame.coords.requires_grad_(True)") == []


def test_lookalike_object_rebuilt_after_the_mark():
    assert _marked(before="frame.coords.requires_grad_(True)\n"
                          "    frame = Frame(torch.randn(5, 3), torch.eye(3))") == []


PLAIN = '''
import numpy as np
import torch


def summarize(t):
    return np.asarray(t.cpu()).mean()


def probe(net, x):
    {mark}
    print(summarize(x))
    y = net(x)
    y.sum().backward()
    {local}


probe(torch.nn.Linear(3, 1), torch.randn(4, 3))
'''


def test_caller_marks_tensor_it_passes():
    src = PLAIN.format(mark="x.requires_grad_()", local="pass")
    assert _found(src, "GT116") == [7]


def test_marked_tensor_read_in_the_same_function():
    src = PLAIN.format(mark="x.requires_grad_()", local="print(x.numpy())")
    assert _found(src, "GT116") == [7, 15]


def test_lookalike_unmarked_tensor():
    src = PLAIN.format(mark="pass", local="print(x.numpy())")
    assert _found(src, "GT116") == []


SCRIPT = '''
import torch
import torch.nn as nn


class Scaler:
    def apply(self, batch):
        torch.set_grad_enabled(False)
        return batch / batch.abs().max()


class Trainer:
    def __init__(self, net):
        self.net = net
        self.opt = torch.optim.SGD(net.parameters(), lr=0.1)

    def step(self, batch, target):
        self.opt.zero_grad()
        loss = (self.net(batch) - target).pow(2).mean()
        loss.backward()
        self.opt.step()


net = nn.Linear(4, 1)
trainer = Trainer(net)
batch, target = torch.randn(8, 4), torch.randn(8, 1)
for epoch in range(3):
    {first}
    {second}
'''


def test_script_leak_reaches_a_held_trainer():
    src = SCRIPT.format(first="batch = Scaler().apply(batch)",
                        second="trainer.step(batch, target)")
    assert _found(src, "GT203") == [8]


def test_script_leak_after_the_step_in_a_loop():
    src = SCRIPT.format(first="trainer.step(batch, target)",
                        second="batch = Scaler().apply(batch)")
    assert _found(src, "GT203") == [8]


def test_lookalike_script_turns_grad_back_on():
    src = SCRIPT.format(first="batch = Scaler().apply(batch)",
                        second="torch.set_grad_enabled(True)\n    trainer.step(batch, target)")
    assert _found(src, "GT203") == []


# NOTE [parameters added through calls]: a helper run after the DDP wrap gives the wrapped
# model new parameters, through a method of its submodules
LATE = '''
import torch
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel


class Side(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim
        self.gain = None

    def grow(self):
        {grow}

    def forward(self, x):
        return x if self.gain is None else x * self.gain


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.side = Side(4)

    def widen(self):
        self.extra = nn.Linear(4, 4)

    def forward(self, x):
        return self.side(self.fc(x))


def attach(module):
    for m in module.modules():
        if isinstance(m, Side):
            m.grow()


def main():
    net = Net()
    {before}
    model = DistributedDataParallel(net)
    {after}
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
'''

_GROW = "self.gain = nn.Parameter(torch.ones(self.dim))"


def _late(grow=_GROW, before="pass", after="attach(model.module)"):
    return _found(LATE.format(grow=grow, before=before, after=after), "GT614")


def test_helper_adds_parameter_after_wrap():
    assert _late() == [43]


def test_method_of_wrapped_module_adds_layer_after_wrap():
    assert _late(after="model.module.widen()") == [43]
    assert _late(after="net.widen()") == [43]


def test_lookalike_helper_runs_before_wrap():
    assert _late(before="attach(net)", after="pass") == []


def test_lookalike_helper_adds_a_plain_tensor():
    assert _late(grow="self.gain = torch.ones(self.dim)") == []


def test_lookalike_helper_copies_into_existing():
    assert _late(grow="self.fc_scale = 2.0") == []


def test_lookalike_other_model_grown():
    assert _late(after="Net().widen()") == []


# NOTE [frozen through calls]: part of the wrapped model frozen after the DDP wrap by a
# helper or a method handed the wrapped model
FROZEN = '''
import torch
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Linear(4, 4)
        self.top = nn.Linear(4, 2)

    def settle(self):
        for p in self.trunk.parameters():
            p.requires_grad = False

    def forward(self, x):
        return self.top(self.trunk(x))


def pin(m):
    m.trunk.requires_grad_(False)


def pin_all(m):
    for p in m.parameters():
        p.requires_grad = False


def main():
    net = Net()
    {before}
    model = DistributedDataParallel(net{kw})
    {after}
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
'''


def _frozen(before="pass", after="pin(model.module)", kw=""):
    return _found(FROZEN.format(before=before, after=after, kw=kw), "GT452")


def test_helper_freezes_part_of_wrapped_model_after_wrap():
    assert _frozen() == [34]
    assert _frozen(after="pin(net)") == [34]


def test_method_freezes_part_of_wrapped_model_after_wrap():
    assert _frozen(after="model.module.settle()") == [34]


def test_lookalike_freeze_before_wrap():
    assert _frozen(before="pin(net)", after="pass") == []
    assert _frozen(before="net.settle()", after="pass") == []


def test_lookalike_find_unused_parameters():
    assert _frozen(kw=", find_unused_parameters=True") == []


def test_lookalike_whole_model_frozen():
    assert _frozen(after="pin_all(model.module)") == []


def test_lookalike_other_model_frozen():
    assert _frozen(after="pin(Net())") == []
