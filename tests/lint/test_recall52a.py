"""Session 52, helper recall52a: a copy of a list of graph values (``torch.tensor([...])``)
inside a loss that stays live elsewhere (NOTE [rebuilt beside a live value]), and the
loss-path analysis of a callee read in its own class when a caller asks for it first (NOTE
[loss paths]). Each shape: a buggy twin with its code and line, silent look-alikes."""
from __future__ import annotations

import textwrap

from gradtrace.lint import check_source


def _found(src: str, code: str = "GT104") -> list[int]:
    return sorted(f.line for f in check_source(textwrap.dedent(src)) if f.code == code)


# a triplet-style loss written as a plain function: the hard negatives' distances are
# gathered into a new tensor and added to the anchor-positive distance
MARGIN = '''
import torch
import torch.nn.functional as F


def margin_loss(anchor, positive, negatives, margin=0.2):
    d_pos = F.pairwise_distance(anchor, positive).mean()
    {neg}
    return F.relu(margin + d_pos - d_neg)


def fit(encoder, optimizer, loader):
    for a, p, ns in loader:
        optimizer.zero_grad()
        fa, fp = encoder(a), encoder(p)
        loss = margin_loss(fa, fp, [encoder(n) for n in ns])
        loss.backward()
        optimizer.step()
'''


def _margin(neg: str) -> list[int]:
    return _found(MARGIN.format(neg=neg))


def test_copied_negatives_subtracted_from_a_live_distance():
    assert _margin("d_neg = torch.Tensor([F.pairwise_distance(anchor, n).mean() "
                   "for n in negatives]).min()") == [8]


def test_copied_negatives_through_as_tensor_of_a_tuple():
    assert _margin("d_neg = torch.as_tensor((F.pairwise_distance(anchor, negatives[0]).mean(), "
                   "F.pairwise_distance(anchor, negatives[1]).mean())).min()") == [8]


def test_look_alike_negatives_stacked():
    assert _margin("d_neg = torch.stack([F.pairwise_distance(anchor, n).mean() "
                   "for n in negatives]).min()") == []


def test_look_alike_copy_of_data_beside_a_live_distance():
    assert _margin("d_neg = torch.tensor([0.5, 0.7]).min()") == []


def test_look_alike_copy_used_as_a_weight():
    # a factor built from the terms' values is a weight (dynamic loss weighting), not a term
    assert _margin("d_neg = d_pos * torch.tensor([F.pairwise_distance(anchor, n).mean() "
                   "for n in negatives]).softmax(0)[0]") == []


# a loss method of a trainer picks its reduction by a setting: one arm copies the terms
TRAINER = '''
import torch
import torch.nn as nn


class Trainer:
    def __init__(self, net, hard_mining):
        self.net, self.hard_mining = net, hard_mining
        self.crit = nn.SmoothL1Loss()
        self.opt = torch.optim.AdamW(net.parameters())

    def compute_loss(self, outs, targets):
        if self.hard_mining:
            {hard}
        else:
            total = torch.stack([self.crit(o, t) for o, t in zip(outs, targets)]).mean()
        return total

    def step(self, xs, ys):
        self.opt.zero_grad()
        loss = self.compute_loss([self.net(x) for x in xs], ys)
        loss.backward()
        self.opt.step()
'''


def test_one_arm_copies_the_terms():
    assert _found(TRAINER.format(
        hard="total = torch.tensor([self.crit(o, t) for o, t in zip(outs, targets)]).max()")) \
        == [14]


def test_look_alike_both_arms_keep_the_graph():
    assert _found(TRAINER.format(
        hard="total = torch.stack([self.crit(o, t) for o, t in zip(outs, targets)]).max()")) \
        == []


def test_look_alike_arm_copies_numbers_for_a_weight():
    # the copy only weighs live terms on that arm: the arm stays live
    assert _found(TRAINER.format(
        hard="total = (torch.tensor([self.crit(o, t).item() for o, t in zip(outs, targets)])"
             ".softmax(0) * torch.stack([self.crit(o, t) for o, t in zip(outs, targets)]))"
             ".sum()")) == []


# NOTE [loss paths]: the training function comes first, so the loss module's analysis is
# asked (and memoised) from the caller's visit; the module's class is read from the tree
BEFORE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


def train(model, opt, batches):
    crit = RateLoss()
    for x in batches:
        opt.zero_grad()
        out = model(x)
        {cut}
        losses = crit(out, x)
        losses["loss"].backward()
        opt.step()


class RateLoss(nn.Module):
    def __init__(self, lmbda=0.01):
        super().__init__()
        self.lmbda = lmbda

    def forward(self, output, target):
        rate = sum(-torch.log2(p).mean() for p in output["probs"].values())
        dist = F.mse_loss(output["recon"], target)
        return {{"loss": self.lmbda * dist + rate, "rate": rate}}
'''


def test_callee_defined_after_its_caller_read_in_its_class():
    assert _found(BEFORE.format(cut='out["recon"] = out["recon"].detach()'), "GT107") == [12]


def test_look_alike_callee_after_its_caller_nothing_cut():
    assert _found(BEFORE.format(cut="pass"), "GT107") == []


# a statistic written in NumPy is handed the model's features already cut; the helper keeps
# a running total named like itself (its own variable, not a use of the function)
NUMPY_HELPER = '''
import numpy as np
import torch
import torch.nn.functional as F


def spread_penalty(features):
    spread_penalty = 0.0
    for row in features:
        spread_penalty += np.abs(row - features.mean(0)).sum()
    return spread_penalty / len(features)


def run_epoch(backbone, head, opt, batches, w=0.1):
    for x, y in batches:
        emb = backbone(x)
        ce = F.cross_entropy(head(emb), y)
        reg = spread_penalty({arg})
        loss = ce + w * reg
        opt.zero_grad()
        loss.backward()
        opt.step()
'''


def _numpy_helper(tmp_path, arg: str, name: str = "spread_penalty") -> list[tuple[str, int]]:
    # a file on disk in a project of two: "every caller" includes the other file's (none)
    src = textwrap.dedent(NUMPY_HELPER.format(arg=arg)).replace("spread_penalty", name)
    (tmp_path / "data.py").write_text("import torch\n\nBATCHES = []\n")
    path = tmp_path / "fit.py"
    path.write_text(src)
    return [(f.code, f.line) for f in check_source(src, str(path)) if f.code.startswith("GT10")]


def test_caller_cuts_what_a_numpy_helper_gets(tmp_path):
    assert _numpy_helper(tmp_path, "emb.detach().cpu().numpy()") == [("GT103", 18)]


def test_caller_cut_named_when_the_helper_is_a_loss_by_its_name(tmp_path):
    # (before: GT103 inside the helper, on `np.abs`, as if it were handed the tensor)
    assert _numpy_helper(tmp_path, "emb.detach().cpu().numpy()", "spread_loss") == [
        ("GT103", 18)]


def test_look_alike_numpy_helper_on_data(tmp_path):
    assert _numpy_helper(tmp_path, "x.cpu().numpy()") == []
    assert _numpy_helper(tmp_path, "x.cpu().numpy()", "spread_loss") == []


# NOTE [data attributes]: a trainer object keeps its batch on itself; the stepped encoder
# reaches the auxiliary term only through a detach, while the term stays live through the
# auxiliary head (its own weights, not stepped here)
HOLDER = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Runner:
    def __init__(self):
        self.encoder = nn.Sequential(nn.Linear(16, 32), nn.ReLU())
        self.cls_head = nn.Linear(32, 5)
        self.aux_head = nn.Linear(32, 3)
        self.opt = torch.optim.SGD(
            list(self.encoder.parameters()) + list(self.cls_head.parameters()), lr=0.01)

    def load(self, feats, cls_target, aux_target):
        self.feats, self.cls_target, self.aux_target = feats, cls_target, aux_target

    def update(self):
        z = self.encoder(self.feats)
        main = F.cross_entropy(self.cls_head(z), self.cls_target)
        aux = F.cross_entropy(self.aux_head({z}), self.aux_target)
        self.opt.zero_grad()
        (main + 0.5 * aux).backward()
        self.opt.step()


runner = Runner()
for _ in range(2):
    runner.load(torch.randn(4, 16), torch.randint(0, 5, (4,)), {aux})
    runner.update()
'''


def test_stepped_encoder_cut_from_a_term_read_with_stored_targets(tmp_path):
    src = textwrap.dedent(HOLDER.format(z="z.detach()", aux="torch.randint(0, 3, (4,))"))
    (tmp_path / "data.py").write_text("import torch\n")
    path = tmp_path / "runner.py"
    path.write_text(src)
    assert sorted(f.line for f in check_source(src, str(path)) if f.code == "GT109") == [21]


def test_look_alike_term_reads_the_live_encoder_output(tmp_path):
    src = textwrap.dedent(HOLDER.format(z="z", aux="torch.randint(0, 3, (4,))"))
    (tmp_path / "data.py").write_text("import torch\n")
    path = tmp_path / "runner.py"
    path.write_text(src)
    assert [f for f in check_source(src, str(path)) if f.code == "GT109"] == []


def test_look_alike_stored_target_made_by_a_network(tmp_path):
    # the stored value may carry a graph (another network's output): the attribute stays live
    src = textwrap.dedent(HOLDER.format(z="z.detach()", aux="nn.Linear(16, 3)(torch.randn(4, 16))"))
    (tmp_path / "data.py").write_text("import torch\n")
    path = tmp_path / "runner.py"
    path.write_text(src)
    assert [f for f in check_source(src, str(path)) if f.code == "GT109"] == []
