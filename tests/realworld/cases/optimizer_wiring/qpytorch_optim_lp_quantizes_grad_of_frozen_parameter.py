"""QPyTorch's `OptimLP` wraps an SGD/Adam optimizer for low-precision training: before stepping it quantizes every parameter's gradient in place (`p.grad.data = grad_quant(p.grad.data * grad_scaling)`) for every parameter of every param group. A model whose pretrained feature extractor is frozen still hands all its parameters to the optimizer (plain PyTorch optimizers skip parameters whose `.grad` is None), so the frozen weights are in the param groups with `.grad` None and the first `optimizer.step()` crashes inside the wrapper. The fix skips parameters whose gradient is None, as `torch.optim` does.

source: https://github.com/Tiiiger/QPyTorch/pull/41
kind: bug
symptom: crash
verified: AttributeError: 'NoneType' object has no attribute 'data'
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.optim import SGD, Adam, Optimizer

torch.manual_seed(0)
torch.set_num_threads(1)


def fixed_point_quantize(x, wl=8, fl=6):
    scale = 2.0 ** fl
    bound = 2.0 ** (wl - fl - 1)
    return torch.clamp(torch.round(x * scale) / scale, -bound, bound - 1 / scale)


class OptimLP(Optimizer):
    """Low-precision wrapper: quantizes gradients before and weights after the wrapped step."""

    def __init__(self, optim, weight_quant=None, grad_scaling=1.0, grad_quant=None):
        assert isinstance(optim, (SGD, Adam))
        super().__init__(optim.param_groups, optim.defaults)
        self.param_groups = optim.param_groups
        self.optim = optim
        self.grad_scaling = grad_scaling
        self.weight_quant = weight_quant
        self.grad_quant = grad_quant

    def step(self, closure=None):
        if self.grad_quant is not None:
            for group in self.param_groups:
                for p in group["params"]:
                    p.grad.data = self.grad_quant(p.grad.data * self.grad_scaling)  # ROOT
        loss = self.optim.step()
        if self.weight_quant is not None:
            for group in self.param_groups:
                for p in group["params"]:
                    p.data = self.weight_quant(p.data).data
        return loss


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        return self.head(self.features(x))


def build(freeze_features=True):
    model = Classifier()
    if freeze_features:
        for p in model.features.parameters():  # pretrained extractor, fine-tune the head only
            p.requires_grad = False
    base = SGD(model.parameters(), lr=0.05, momentum=0.9)
    quant = lambda x: fixed_point_quantize(x, wl=8, fl=6)
    return model, OptimLP(base, weight_quant=quant, grad_quant=quant)


model, optimizer = build()
x = torch.randn(256, 20)
y = (x[:, :4].argmax(dim=1))
for epoch in range(5):
    for xb, yb in zip(x.split(32), y.split(32)):
        loss = F.cross_entropy(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.4f}")
