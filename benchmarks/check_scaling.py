"""Does `gradtrace check` cost grow with the file, like ``ast.parse``? One generated file per size.

    python benchmarks/check_scaling.py [LINES ...]     # default: 5000 10000 20000 40000 80000

Each file is dense training code as real projects write it: model classes (layers, forward,
frozen parts, buffers), datasets, helpers that build losses and optimizers, training loops
(zero_grad, backward, clipping, step, schedulers, accumulation, AMP), evaluation under
``no_grad``, logging with ``.item()``, in blocks that each use their own names. Prints, per
size, the CPU seconds of read + ``ast.parse`` (the collector off) and of checking the file in one process (default
rules), the CPU per 1,000 lines and the ratio between the two. The ratio is taken against a
parse with the cyclic garbage collector off, as the checker runs its files (``vs parse``: the
same treatment on both sides, as check_speed.py's fair ratio, NOTE [fair denominator] there);
the ratio against a parse with the collector on is printed next to it (``vs parse, gc on``:
the figure before session 51, kept so that the history stays comparable; on large files the
collector's passes over the new tree make that plain parse grow faster than the file, so it
flatters the check more the larger the file). Goal: CPU per line flat within
1.5x across sizes and at most 2x read + parse. Both sides are measured in turn, three times, and
the fastest of each is kept, so a shared machine's load weighs on both alike.
"""
from __future__ import annotations

import ast
import os
import sys
import tempfile
import time

SIZES = (5000, 10000, 20000, 40000, 80000)
REPEAT = 3

HEADER = '''"""Generated training code for the scaling benchmark."""
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

DEVICE = torch.device("cpu")
'''

BLOCK = '''

class Encoder{k}(nn.Module):
    """Encoder number {k}: a small MLP with a frozen embedding."""

    def __init__(self, vocab, dim, hidden, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.embed.weight.requires_grad = False
        self.blocks = nn.ModuleList([nn.Linear(dim, dim) for _ in range(layers)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, hidden)
        self.register_buffer("scale", torch.ones(1))
        self.dropout = nn.Dropout(0.1)

    def forward(self, ids, mask=None):
        h = self.embed(ids)
        for block in self.blocks:
            h = h + self.dropout(F.gelu(block(h)))
        h = self.norm(h)
        if mask is not None:
            h = h * mask.unsqueeze(-1)
        pooled = h.mean(dim=1) * self.scale
        return self.head(pooled)


class Classifier{k}(nn.Module):
    def __init__(self, encoder, hidden, classes):
        super().__init__()
        self.encoder = encoder
        self.fc = nn.Linear(hidden, classes)
        self.temperature = nn.Parameter(torch.ones(1))

    def forward(self, ids, mask=None):
        feats = self.encoder(ids, mask)
        logits = self.fc(F.relu(feats)) / self.temperature
        return logits, feats


class Pairs{k}(Dataset):
    def __init__(self, n, length, vocab, classes):
        self.ids = torch.randint(0, vocab, (n, length))
        self.labels = torch.randint(0, classes, (n,))

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.ids[i], self.labels[i]


def build_optimizer_{k}(model, lr, weight_decay=0.01):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (no_decay if name.endswith("bias") or "norm" in name else decay).append(p)
    groups = [{{"params": decay, "weight_decay": weight_decay}},
              {{"params": no_decay, "weight_decay": 0.0}}]
    return torch.optim.AdamW(groups, lr=lr)


def compute_loss_{k}(logits, feats, labels, alpha=0.1):
    ce = F.cross_entropy(logits, labels)
    reg = feats.pow(2).mean()
    return ce + alpha * reg


def accuracy_{k}(logits, labels):
    preds = logits.argmax(dim=-1)
    return (preds == labels).float().mean().item()


@torch.no_grad()
def evaluate_{k}(model, loader):
    model.eval()
    total, correct, count = 0.0, 0.0, 0
    for ids, labels in loader:
        ids, labels = ids.to(DEVICE), labels.to(DEVICE)
        logits, feats = model(ids)
        total += compute_loss_{k}(logits, feats, labels).item() * len(labels)
        correct += accuracy_{k}(logits, labels) * len(labels)
        count += len(labels)
    model.train()
    return total / max(count, 1), correct / max(count, 1)


def train_{k}(epochs=2, lr=1e-3, accum=2, clip=1.0, log_every=10):
    encoder = Encoder{k}(vocab=100, dim=16, hidden=32)
    model = Classifier{k}(encoder, hidden=32, classes=4).to(DEVICE)
    data = Pairs{k}(64, 8, 100, 4)
    loader = DataLoader(data, batch_size=8, shuffle=True)
    val_loader = DataLoader(data, batch_size=16)
    optimizer = build_optimizer_{k}(model, lr)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.9)
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    history = []
    for epoch in range(epochs):
        model.train()
        running = 0.0
        optimizer.zero_grad()
        for step, (ids, labels) in enumerate(loader):
            ids, labels = ids.to(DEVICE), labels.to(DEVICE)
            with torch.autocast("cpu", enabled=False):
                logits, feats = model(ids)
                loss = compute_loss_{k}(logits, feats, labels) / accum
            scaler.scale(loss).backward()
            running += loss.item()
            if (step + 1) % accum == 0:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
            if step % log_every == 0:
                print(f"epoch {{epoch}} step {{step}} loss {{running / (step + 1):.4f}}")
        scheduler.step()
        val_loss, val_acc = evaluate_{k}(model, val_loader)
        history.append((epoch, running, val_loss, val_acc))
    return model, history


def finetune_head_{k}(model, loader, steps=5):
    for p in model.encoder.parameters():
        p.requires_grad_(False)
    head_opt = torch.optim.SGD(model.fc.parameters(), lr=0.01, momentum=0.9)
    it = iter(loader)
    for _ in range(steps):
        try:
            ids, labels = next(it)
        except StopIteration:
            it = iter(loader)
            ids, labels = next(it)
        head_opt.zero_grad(set_to_none=True)
        logits, _ = model(ids)
        loss = F.cross_entropy(logits, labels)
        loss.backward()
        head_opt.step()
    with torch.no_grad():
        probe = model.fc.weight.detach().clone()
        norm = probe.norm().item()
    return math.sqrt(norm) if norm > 0 else 0.0


def sgd_by_hand_{k}(n=32, steps=3):
    w = torch.zeros(4, 1, requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    x, y = torch.randn(n, 4), torch.randn(n, 1)
    for _ in range(steps):
        pred = x @ w + b
        loss = F.mse_loss(pred, y)
        loss.backward()
        with torch.no_grad():
            w -= 0.1 * w.grad
            b -= 0.1 * b.grad
            w.grad.zero_()
            b.grad.zero_()
    return w.detach(), b.detach()


def save_{k}(model, optimizer, path):
    state = {{"model": model.state_dict(), "optimizer": optimizer.state_dict()}}
    torch.save(state, os.path.join(path, "ckpt_{k}.pt"))


# experiment {k}, run as a script would (notebook exports look like this)
model = Classifier{k}(Encoder{k}(100, 16, 32), 32, 4)
opt = build_optimizer_{k}(model, lr=3e-4)
loader = DataLoader(Pairs{k}(32, 8, 100, 4), batch_size=8)
losses = []
for epoch in range(2):
    for ids, labels in loader:
        opt.zero_grad()
        logits, feats = model(ids)
        loss = compute_loss_{k}(logits, feats, labels)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        val = evaluate_{k}(model, loader)
    model.train()
print("experiment {k}", sum(losses) / len(losses), val)
'''


def generate(lines: int) -> str:
    """Training code of about ``lines`` lines, in one module."""
    parts = [HEADER]
    n = HEADER.count("\n")
    k = 0
    while n < lines:
        block = BLOCK.format(k=k)
        parts.append(block)
        n += block.count("\n")
        k += 1
    return "".join(parts)


def measure(path: str) -> tuple[float, float, float, int]:
    """Fastest CPU seconds of read+parse (the collector on, as a plain tool runs; and off, as
    the checker runs its files) and of check over REPEAT turns, and the findings."""
    import gc

    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings

    settings = Settings(exclude=())
    base = base_off = check = float("inf")
    found = 0
    for _ in range(REPEAT):
        start = time.process_time()
        with open(path, "rb") as fh:
            ast.parse(fh.read())
        base = min(base, time.process_time() - start)
        gc.disable()
        try:
            start = time.process_time()
            with open(path, "rb") as fh:
                ast.parse(fh.read())
            base_off = min(base_off, time.process_time() - start)
        finally:
            gc.enable()
        start = time.process_time()
        found = len(check_paths([path], settings, jobs=1).findings)
        check = min(check, time.process_time() - start)
    return base, base_off, check, found


def main() -> int:
    sizes = [int(a) for a in sys.argv[1:]] or list(SIZES)
    print(f"{'lines':>7} {'parse s':>8} {'check s':>8} {'check ms/1k lines':>18} "
          f"{'vs parse':>9} {'vs parse, gc on':>16} {'findings':>9}")
    per_line = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            text = generate(size)
            path = os.path.join(tmp, f"train_{size}.py")
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
            n = text.count("\n")
            base, base_off, check, found = measure(path)
            per_line.append(check / n)
            print(f"{n:7d} {base_off:8.2f} {check:8.2f} {check / n * 1e6:18.1f} "
                  f"{check / base_off:8.2f}x {check / base:15.2f}x {found:9d}", flush=True)
    print(f"CPU per line, largest / smallest size: {per_line[-1] / per_line[0]:.2f}x "
          f"(max / min {max(per_line) / min(per_line):.2f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
