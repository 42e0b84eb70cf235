"""Shapes from the projects of docs/triage/unseen46b.md (session 46), each in another spelling
than the project's and next to a buggy twin that is still reported; all run on real torch."""
from __future__ import annotations

import pytest

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
    # asawaswapnil/DL-Homeworks-with-PyTorch (hw4/p2/scripts/train.py): a test loop with grad
    # on decodes the model's indices into text, `"".join(...)`, and collects the strings: a
    # str holds no graph (NOTE [graphless by construction]). Twin: the scores collected
    "text-of-decoded-ids-collected": (Shape("""
        class Speller(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 4)
            def decode(self, logits):
                return [int(v) for v in logits.argmax(-1)]
            def forward(self, x):
                logits = self.fc(x)
                return logits, self.decode(logits)
        vocab = "abcd"
        def test_classify(model, test_loader):
            final = []
            for x in test_loader:
                logits, words = model(x)
                chars = "".join(vocab[i] for i in words)
                final.append(chars)
            return final
        out = test_classify(Speller(), [torch.randn(5, 3) for _ in range(3)])
        """, "GT505", holds="all(isinstance(c, str) and len(c) == 5 for c in out)"),
        Shape("""
        class Speller(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 4)
            def decode(self, logits):
                return [int(v) for v in logits.argmax(-1)]
            def forward(self, x):
                logits = self.fc(x)
                return logits, self.decode(logits)
        vocab = "abcd"
        def test_classify(model, test_loader):
            final = []
            for x in test_loader:
                logits, words = model(x)
                scores = logits.softmax(-1)
                final.append(scores)
            return final
        out = test_classify(Speller(), [torch.randn(5, 3) for _ in range(3)])
        """, "GT505", line=16, holds="out[0].grad_fn is not None")),
    # martinez-hub/underconfidence-adversarial-training (experiments/verify_attacks.py): a
    # helper of the file returns a dict of `.item()` numbers; the attack loop collects the
    # dicts (NOTE [graphless by construction]). Twin: the dict holds the loss tensor itself
    "metrics-dict-of-numbers-collected": (Shape("""
        def compute_metrics(head, feats, y):
            with torch.no_grad():
                logits = head(feats)
                acc = logits.argmax(1).eq(y).float().mean().item() * 100
                loss = F.cross_entropy(logits, y).item()
            return {"accuracy": acc, "loss": loss}
        def evaluate(backbone, head, test_loader):
            metrics = []
            for x, y in test_loader:
                feats = backbone(x)
                clean = compute_metrics(head, feats, y)
                metrics.append(clean)
            return metrics
        out = evaluate(nn.Linear(4, 4), nn.Linear(4, 3),
                       [(torch.randn(6, 4), torch.randint(0, 3, (6,))) for _ in range(3)])
        """, "GT505", holds="all(isinstance(m['loss'], float) for m in out)"),
        Shape("""
        def compute_metrics(head, feats, y):
            logits = head(feats)
            acc = logits.argmax(1).eq(y).float().mean().item() * 100
            loss = F.cross_entropy(logits, y)
            return {"accuracy": acc, "loss": loss}
        def evaluate(backbone, head, test_loader):
            metrics = []
            for x, y in test_loader:
                feats = backbone(x)
                clean = compute_metrics(head, feats, y)
                metrics.append(clean)
            return metrics
        out = evaluate(nn.Linear(4, 4), nn.Linear(4, 3),
                       [(torch.randn(6, 4), torch.randint(0, 3, (6,))) for _ in range(3)])
        """, "GT505", line=11, holds="out[0]['loss'].grad_fn is not None")),
    # pourmand1376/DL-Homeworks (HW2/DL_HW2_Exercise5.py): an IoU of thresholded masks
    # (`output > 0.5`, a bool tensor) summed over the test loader with grad on
    # (NOTE [graphless by construction]). Twin: a soft IoU of the raw outputs
    "mask-iou-summed": (Shape("""
        def iou_of(output, target):
            oss = output > 0.5
            tss = target > 0.5
            inter = (oss & tss).sum(dim=[1, 2])
            union = (oss | tss).sum(dim=[1, 2])
            return ((inter + 1e-5) / (union + 1e-5)).mean()
        model = nn.Conv1d(2, 2, 1)
        test_loader = [(torch.randn(3, 2, 5), torch.rand(3, 2, 5)) for _ in range(3)]
        iou = 0.0
        for data, target in test_loader:
            output = torch.sigmoid(model(data))
            iou += iou_of(output, target)
        """, "GT505", holds="iou.grad_fn is None"),
        Shape("""
        def soft_iou(output, target):
            inter = (output * target).sum(dim=[1, 2])
            union = (output + target - output * target).sum(dim=[1, 2])
            return ((inter + 1e-5) / (union + 1e-5)).mean()
        model = nn.Conv1d(2, 2, 1)
        test_loader = [(torch.randn(3, 2, 5), torch.rand(3, 2, 5)) for _ in range(3)]
        iou = 0.0
        for data, target in test_loader:
            output = torch.sigmoid(model(data))
            iou += soft_iou(output, target)
        """, "GT505", line=10, holds="iou.grad_fn is not None")),
    # littledragon219/meta-learning-prototypical-network (train_phase2_dg.py): `loss` made
    # under `no_grad` for validation, then a training loop written on one line, `loss = ...;
    # loss.backward()`: the backward reads the rebinding of its own line
    # (NOTE [bound earlier on the same line]). Twin: the line never rebinds `loss`
    "loss-rebound-earlier-on-the-backward-line": (Shape("""
        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        x, y = torch.randn(8, 3), torch.randn(8, 1)
        with torch.no_grad():
            loss = F.mse_loss(net(x), y)
        first = loss.item()
        for xb, yb in [(x, y)] * 3: opt.zero_grad(); loss = F.mse_loss(net(xb), yb); loss.backward(); opt.step()
        """, "GT201", holds="loss.item() < first"),
        Shape("""
        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        x, y = torch.randn(8, 3), torch.randn(8, 1)
        with torch.no_grad():
            loss = F.mse_loss(net(x), y)
        first = loss.item()
        for xb, yb in [(x, y)] * 3: opt.zero_grad(); out = F.mse_loss(net(xb), yb); loss.backward(); opt.step()
        """, "GT201", line=4, raises=(RuntimeError, "does not require grad"))),
    # liaopeiyuan/kaggle-solutions (TGS_salt/training/train6_SAN.py): the legacy
    # `size_average=True` overrides `reduction='none'` (NOTE [legacy reduction]): the loss
    # is a mean. Twin: `reduce=False` overrides `reduction='mean'`: one value per element
    "legacy-size-average-decides-reduction": (Shape("""
        net = nn.Conv2d(1, 1, 3, padding=1)
        x, truth = torch.randn(2, 1, 4, 4), torch.rand(2, 1, 4, 4)
        metric = nn.BCEWithLogitsLoss(size_average=True, reduction='none')
        out = net(x)
        loss = out.abs().mean() + metric(out.squeeze(1), truth.squeeze(1))
        loss.backward()
        """, "GT715", holds="loss.dim() == 0"),
        Shape("""
        net = nn.Conv2d(1, 1, 3, padding=1)
        x, truth = torch.randn(2, 1, 4, 4), torch.rand(2, 1, 4, 4)
        metric = nn.BCEWithLogitsLoss(reduce=False, reduction='mean')
        out = net(x)
        loss = out.abs().mean() + metric(out.squeeze(1), truth.squeeze(1))
        loss.backward()
        """, "GT715", line=6, raises=(RuntimeError, "implicitly created only for scalar"))),
    # AmanDaVinci/meta-learning-few-shot-domain-adaptation (trainers/maml_trainer.py): the
    # episode loop backwards the meta-loss and steps; `self.outer_loop` runs `self.inner_loop`,
    # which starts with `self.model.zero_grad()` (NOTE [helper clears by zero_grad]). Twin: the
    # inner loop clears nothing: every step applies the sum of the episodes' gradients
    "zero-grad-in-a-called-method": (Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body, self.head = nn.Linear(3, 3), nn.Linear(3, 1)
            def forward(self, x):
                return self.head(self.body(x))
        class Trainer:
            def __init__(self, model):
                self.model = model
                self.opt = torch.optim.SGD(self.model.head.parameters(), lr=0.0)
            def inner_loop(self, x, y):
                self.model.zero_grad()
                return F.mse_loss(self.model(x), y)
            def outer_loop(self, tasks):
                return sum(self.inner_loop(x, y) for x, y in tasks)
            def train(self, episodes):
                for tasks in episodes:
                    loss = self.outer_loop(tasks)
                    loss.backward()
                    self.opt.step()
        tasks = [(torch.randn(4, 3), torch.randn(4, 1))]
        t = Trainer(Net())
        t.train([tasks])
        g_one = t.model.head.weight.grad.clone()
        t.train([tasks] * 3)
        """, "GT501", holds="torch.allclose(t.model.head.weight.grad, g_one)"),
        Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body, self.head = nn.Linear(3, 3), nn.Linear(3, 1)
            def forward(self, x):
                return self.head(self.body(x))
        class Trainer:
            def __init__(self, model):
                self.model = model
                self.opt = torch.optim.SGD(self.model.head.parameters(), lr=0.0)
            def inner_loop(self, x, y):
                self.model.eval()
                return F.mse_loss(self.model(x), y)
            def outer_loop(self, tasks):
                return sum(self.inner_loop(x, y) for x, y in tasks)
            def train(self, episodes):
                for tasks in episodes:
                    loss = self.outer_loop(tasks)
                    loss.backward()
                    self.opt.step()
        tasks = [(torch.randn(4, 3), torch.randn(4, 1))]
        t = Trainer(Net())
        t.train([tasks])
        g_one = t.model.head.weight.grad.clone()
        t.train([tasks] * 3)
        """, "GT501", line=19, holds="torch.allclose(t.model.head.weight.grad, 4 * g_one)")),
    # andrei-iosif/optical-flow-dnn (raft/core/losses.py): RAFT's end-point error, a root of
    # squared differences, computed in the loss module's `forward` but only read as numbers
    # (`.item()`, `epe < 1`) (NOTE [read only as numbers]). Twin: the EPE added to the loss
    "distance-read-only-as-numbers": (Shape("""
        def endpoint_error(flow_pred, flow_gt):
            return torch.sum((flow_pred - flow_gt) ** 2, dim=1).sqrt()
        class FlowLoss(nn.Module):
            def forward(self, flow_pred, flow_gt):
                loss = (flow_pred - flow_gt).abs().mean()
                epe = endpoint_error(flow_pred, flow_gt)
                return loss, {"epe": epe.mean().item(), "1px": (epe < 1).float().mean().item()}
        gt = torch.randn(2, 2, 3)
        pred = gt.clone().requires_grad_(True)
        loss, metrics = FlowLoss()(pred, gt)
        loss.backward()
        """, "GT753", holds="torch.isfinite(pred.grad).all() and metrics['epe'] == 0.0"),
        Shape("""
        def endpoint_error(flow_pred, flow_gt):
            return torch.sum((flow_pred - flow_gt) ** 2, dim=1).sqrt()
        class FlowLoss(nn.Module):
            def forward(self, flow_pred, flow_gt):
                loss = (flow_pred - flow_gt).abs().mean()
                epe = endpoint_error(flow_pred, flow_gt)
                return loss + epe.mean(), {"1px": (epe < 1).float().mean().item()}
        gt = torch.randn(2, 2, 3)
        pred = gt.clone().requires_grad_(True)
        loss, metrics = FlowLoss()(pred, gt)
        loss.backward()
        """, "GT753", line=2, holds="torch.isnan(pred.grad).any()")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_silent_look_alike_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
