"""Session 36, runtime (docs/triage/runtime36.md): the run names the root line first.
Real torch; each bug has its look-alike."""
from __future__ import annotations

from rt_helpers import marked_line

# -- NOTE [body that never ran]; NOTE [class bodies ran with their statement] ------------------
MISNAMED_INIT = """
import torch
import torch.nn as nn

num_layers = 3


class CNNModel(nn.Module):
    def _init_(self):  # <- cause
        super()._init_()
        self.cnn = nn.Conv1d(4, 8, 3, padding=1)
        self.cnns = (num_layers - 1) * [nn.Conv1d(8, 8, 3, padding=1)]
        self.fc = nn.Linear(8 * 6, 3)

    def forward(self, x):
        out = torch.relu(self.cnn(x))
        for cnn in self.cnns:
            out = torch.relu(cnn(out))
        return self.fc(out.flatten(1))


model = CNNModel()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loss = model(torch.randn(2, 4, 6)).sum()
loss.backward()
optimizer.step()
"""


def test_a_misnamed_init_leads_over_the_finding_inside_the_body_that_never_ran(run_script):
    res = run_script(MISNAMED_INIT)
    assert res.code != 0
    first = res.findings[0]
    assert (first["code"], first["line"]) == ("GT444", marked_line(MISNAMED_INIT)), res.findings
    plain_list = marked_line(MISNAMED_INIT, "self.cnns = ")
    assert all(f["line"] != plain_list for f in res.findings), res.findings


PLAIN_LIST = """
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = [nn.Linear(4, 8), nn.Linear(8, 2)]  # <- cause

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
"""


def test_the_plain_list_in_an_init_that_ran_still_leads(run_script):
    """The twin the ordering must not touch: `__init__` ran, its plain list is the cause."""
    res = run_script(PLAIN_LIST)
    assert res.code != 0
    first = res.findings[0]
    assert (first["code"], first["line"]) == ("GT401", marked_line(PLAIN_LIST)), res.findings


def test_the_look_alike_with_its_init_spelled_right_is_silent(run_script):
    src = MISNAMED_INIT.replace("def _init_(self):  # <- cause", "def __init__(self):") \
        .replace("super()._init_()", "super().__init__()") \
        .replace("(num_layers - 1) * [nn.Conv1d(8, 8, 3, padding=1)]",
                 "nn.ModuleList([nn.Conv1d(8, 8, 3, padding=1) for _ in range(2)])")
    res = run_script(src)
    assert res.code == 0, res.err
    assert res.findings == [], res.findings


def test_class_body_lines_count_as_ran_with_the_module_but_not_its_methods():
    from gradtrace.runtime.ran import code_spans

    src = "class A:\n    x = 1\n\n    def f(self):\n        return 2\n"
    code = compile(src, __file__, "exec")
    lines = {a for a, b in code_spans([code])[__file__] if a == b}
    assert {1, 2, 4} <= lines and 5 not in lines, lines


# -- NOTE [write into a detached copy] ---------------------------------------------------------
DETACHED_METRIC = """
import torch
import torch.nn as nn
import torch.nn.functional as F


def unwrap(*tensors):
    return (x.detach().cpu() for x in tensors)


class MaskedSum:
    def __init__(self):
        self.total = 0.0

    def __call__(self, predictions, mask):
        predictions, mask = unwrap(predictions, mask)
        predictions = predictions.view(-1)
        predictions *= mask.view(-1)  # <- cause
        self.total += predictions.sum().item()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(6, 8)
        self.head = nn.Linear(8, 1)
        self.metric = MaskedSum()

    def forward(self, x, mask, label):
        pred = self.head(torch.tanh(self.encoder(x))).squeeze(-1)
        loss = (F.mse_loss(pred, label, reduction="none") * mask).sum()
        self.metric(pred, mask)
        return loss


torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    x, label = torch.randn(4, 5, 6), torch.randn(4, 5)
    mask = (torch.rand(4, 5) > 0.3).float()
    loss = model(x, mask, label)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_write_into_a_detached_view_names_the_write_not_the_op_that_saved(run_script):
    res = run_script(DETACHED_METRIC)
    assert res.code != 0
    first = res.findings[0]
    assert (first["code"], first["line"]) == ("GT602", marked_line(DETACHED_METRIC)), \
        res.findings
    detach = marked_line(DETACHED_METRIC, "x.detach().cpu()")
    assert any(r["line"] == detach for r in first["related"]), first


def test_a_write_into_a_detached_copy_of_the_same_shape_is_named_too(run_script):
    src = DETACHED_METRIC.replace("        predictions = predictions.view(-1)\n", "") \
        .replace("predictions *= mask.view(-1)", "predictions *= mask")
    res = run_script(src)
    assert res.code != 0
    assert (res.findings[0]["code"], res.findings[0]["line"]) == ("GT602", marked_line(src)), \
        res.findings


def test_the_metric_on_a_cloned_copy_is_silent(run_script):
    src = DETACHED_METRIC.replace("x.detach().cpu()", "x.detach().clone().cpu()")
    res = run_script(src)
    assert res.code == 0, res.err
    assert res.findings == [], res.findings
