"""convex_adversarial's evaluate_robust turns autograd off for the whole evaluation with torch.set_grad_enabled(False); with the PGD evaluation line enabled, _pgd runs inside that global no-grad state, its attack loss has no graph and loss.backward() fails.

source: https://github.com/locuslab/convex_adversarial/issues/34
kind: bug
symptom: crash
verified: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
import torch.nn as nn
import torch.optim as optim
from torch.autograd import Variable


class Flatten(nn.Module):
    def forward(self, x):
        return x.view(x.size(0), -1)


def _pgd(model, X, y, epsilon, niters=10, alpha=0.01):
    out = model(X)
    err = (out.data.max(1)[1] != y.data).float().sum() / X.size(0)
    X_pgd = Variable(X.data, requires_grad=True)
    for i in range(niters):
        opt = optim.Adam([X_pgd], lr=1e-3)
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(X_pgd), y)
        loss.backward()  # SYMPTOM
        eta = alpha * X_pgd.grad.data.sign()
        X_pgd = Variable(X_pgd.data + eta, requires_grad=True)
        eta = torch.clamp(X_pgd.data - X.data, -epsilon, epsilon)
        X_pgd = Variable(X.data + eta, requires_grad=True)
    err_pgd = (model(X_pgd).data.max(1)[1] != y.data).float().sum() / X.size(0)
    return err, err_pgd


def evaluate_robust(loader, model, epsilon):
    model.eval()
    torch.set_grad_enabled(False)  # ROOT
    pgd_errors = []
    for i, (X, y) in enumerate(loader):
        out = model(Variable(X))
        ce = nn.CrossEntropyLoss()(out, Variable(y))
        err = (out.max(1)[1] != y).float().sum() / X.size(0)
        _, pgd_err = _pgd(model, Variable(X), Variable(y), epsilon)
        pgd_errors.append(pgd_err.item())
    torch.set_grad_enabled(True)
    return pgd_errors


torch.manual_seed(0)
model = nn.Sequential(Flatten(), nn.Linear(28 * 28, 64), nn.ReLU(), nn.Linear(64, 10))
loader = [(torch.rand(16, 1, 28, 28), torch.randint(0, 10, (16,))) for _ in range(2)]
print("PGD errors", evaluate_robust(loader, model, epsilon=0.1))
