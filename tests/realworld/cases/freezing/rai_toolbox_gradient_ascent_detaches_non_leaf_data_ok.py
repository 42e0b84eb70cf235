"""The robustness toolbox's `gradient_ascent` after its fix: non-leaf data and targets are detached before the attack, so `frozen(...)` only flips the flags of leaf tensors and of the model's parameters, and the adversarial-training loop that passes the batch after the learnable input normalisation runs.

source: https://github.com/mit-ll-responsible-ai/responsible-ai-toolbox/commit/e6ef2ebf0f1ecbfd8aab98eeca7fe8bd38fd9524
kind: lookalike
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


def flatten_params(item):
    if isinstance(item, torch.Tensor):
        yield item
        return
    for entry in item:
        if isinstance(entry, dict):
            yield from entry["params"]
        else:
            yield from flatten_params(entry)


def freeze(*items):
    """Set `requires_grad=False` on every tensor/parameter given; return a function restoring the flags."""
    states = {}
    for item in items:
        if isinstance(item, nn.Module):
            item = item.parameters()
        for param in flatten_params(item):
            if param not in states:
                states[param] = param.requires_grad
                param.requires_grad_(False)

    def restore():
        for p, flag in states.items():
            p.requires_grad_(flag)

    return restore


class frozen:
    def __init__(self, *items):
        self.items = items

    def __enter__(self):
        self.restore = freeze(*self.items)

    def __exit__(self, *exc):
        self.restore()


class AdditivePerturbation(nn.Module):
    def __init__(self, like):
        super().__init__()
        self.delta = nn.Parameter(torch.zeros_like(like))

    def forward(self, x):
        return x + self.delta


def gradient_ascent(model, data, target, steps=3, lr=0.05, epsilon=0.1):
    """Maximise the model's loss with an additive perturbation of `data` (L-inf projected)."""
    data = torch.as_tensor(data)
    target = torch.as_tensor(target)
    if not data.is_leaf:
        data = data.detach()
    if not target.is_leaf:
        target = target.detach()
    pmodel = AdditivePerturbation(data)
    optim = torch.optim.SGD(pmodel.parameters(), lr=lr)
    with frozen(data, target, model), torch.enable_grad():
        for _ in range(steps):
            loss = -nn.functional.cross_entropy(model(pmodel(data)), target)
            optim.zero_grad()
            loss.backward()
            pmodel.delta.grad.sign_()
            optim.step()
            with torch.no_grad():
                pmodel.delta.clamp_(-epsilon, epsilon)
        with torch.no_grad():
            return pmodel(data), pmodel.delta.detach()


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1, 3, 1, 1))
        self.shift = nn.Parameter(torch.zeros(1, 3, 1, 1))
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                  nn.Flatten(), nn.Linear(8, 4))

    def normalize(self, images):
        return images * self.scale + self.shift


def adversarial_training(model, steps=3):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(steps):
        images, labels = torch.rand(16, 3, 8, 8), torch.randint(0, 4, (16,))
        normalized = model.normalize(images)
        adv, _ = gradient_ascent(model.body, normalized, labels)
        loss = nn.functional.cross_entropy(model.body(adv), labels)
        loss = loss + nn.functional.cross_entropy(model.body(normalized), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


if __name__ == "__main__":
    print(f"final adversarial-training loss: {adversarial_training(Classifier()):.4f}")
