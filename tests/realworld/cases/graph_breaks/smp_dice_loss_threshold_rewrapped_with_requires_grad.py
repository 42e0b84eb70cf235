"""segmentation_models.pytorch Dice loss with a threshold: _threshold returns (x > threshold) cast to float, which has no grad_fn, and the proposed fix rewraps it as torch.tensor(..., requires_grad=True); backward now runs, but the loss is cut from the model, which never learns.

source: https://github.com/qubvel-org/segmentation_models.pytorch/pull/611
kind: bug
symptom: silent
verified: loss.backward() succeeds, every model weight has .grad None and the weights are identical after 5 optimizer steps
"""
import torch
import torch.nn as nn


def _threshold(x, threshold=None):
    if threshold is not None:
        return torch.tensor((x > threshold).type(x.dtype), requires_grad=True)  # ROOT
    else:
        return x


def f_score(pr, gt, beta=1, eps=1e-7, threshold=None):
    pr = _threshold(pr, threshold=threshold)
    tp = torch.sum(gt * pr)
    fp = torch.sum(pr) - tp
    fn = torch.sum(gt) - tp
    return ((1 + beta ** 2) * tp + eps) / ((1 + beta ** 2) * tp + beta ** 2 * fn + fp + eps)


class DiceLoss(nn.Module):
    def __init__(self, eps=1.0, beta=1.0, activation=None, threshold=None):
        super().__init__()
        self.eps = eps
        self.beta = beta
        self.activation = activation or nn.Sigmoid()
        self.threshold = threshold

    def forward(self, y_pr, y_gt):
        y_pr = self.activation(y_pr)
        return 1 - f_score(y_pr, y_gt, beta=self.beta, eps=self.eps, threshold=self.threshold)


torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 1))
loss_fn = DiceLoss(threshold=0.5)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
before = [p.detach().clone() for p in model.parameters()]
for step in range(5):
    images, masks = torch.randn(2, 3, 16, 16), (torch.rand(2, 1, 16, 16) > 0.5).float()
    loss = loss_fn(model(images), masks)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print([p.grad for p in model.parameters()][0], all(torch.equal(a, b) for a, b in zip(before, model.parameters())))
