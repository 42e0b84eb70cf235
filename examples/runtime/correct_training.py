"""A correct training script full of things that look like gradient bugs but are not.

`gradtrace run examples/runtime/correct_training.py` reports nothing.
"""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16))
        self.frozen = nn.Linear(16, 16)
        self.head = nn.Linear(16, 3)
        for p in self.frozen.parameters():  # intended freezing
            p.requires_grad_(False)

    def forward(self, x):
        return self.head(F.relu(self.frozen(self.backbone(x))))


model = Net()
ema = copy.deepcopy(model)  # EMA copy, updated under no_grad
for p in ema.parameters():
    p.requires_grad_(False)
teacher = nn.Linear(8, 3)
opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.05, momentum=0.9)
x, y = torch.randn(64, 8), torch.randint(0, 3, (64,))

running = 0.0
for step in range(10):
    opt.zero_grad()
    logits = model(x)
    target = teacher(x).detach().softmax(-1)  # detach for targets
    loss = F.cross_entropy(logits, y) + 0.1 * F.kl_div(logits.log_softmax(-1), target,
                                                       reduction="batchmean")
    aux = logits.pow(2).mean()
    aux.backward(retain_graph=True)  # retain_graph on purpose: a second backward follows
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    running += loss.item()  # .item() for logging
    acc = (logits.argmax(1) == y).float().mean().item()
    with torch.no_grad():
        for pe, pm in zip(ema.parameters(), model.parameters()):
            pe.mul_(0.9).add_(pm, alpha=0.1)

model.eval()
with torch.no_grad():  # validation under no_grad
    val = F.cross_entropy(model(x), y)
print(f"loss {running / 10:.3f} acc {acc:.2f} val {val.item():.3f}")

# correct manual SGD on a leaf
w = torch.randn(3, requires_grad=True)
for _ in range(3):
    loss = (w ** 2).sum()
    loss.backward()
    with torch.no_grad():
        w -= 0.1 * w.grad
    w.grad.zero_()

# GAN step with the fake detached for the discriminator
G, D = nn.Linear(2, 2), nn.Linear(2, 1)
opt_g, opt_d = torch.optim.Adam(G.parameters()), torch.optim.Adam(D.parameters())
for _ in range(2):
    fake = G(torch.randn(4, 2))
    opt_d.zero_grad()
    d_loss = F.softplus(D(fake.detach())).mean() + F.softplus(-D(torch.randn(4, 2))).mean()
    d_loss.backward()
    opt_d.step()
    opt_g.zero_grad()
    g_loss = F.softplus(-D(fake)).mean()
    g_loss.backward()
    opt_g.step()
