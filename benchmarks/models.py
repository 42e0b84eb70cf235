"""CPU models for the runtime benchmarks: a small and a larger MLP, a ResNet-style CNN, a
transformer encoder, and a REINFORCE policy episode.

Each ``make_*`` returns ``(model, batch_fn, loss_fn)``; ``batch_fn()`` gives ``(x, y)``.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

Batch = tuple[torch.Tensor, torch.Tensor]


def make_mlp(batch: int = 128) -> tuple[nn.Module, Callable[[], Batch], Callable]:
    """784 -> 512 -> 512 -> 10 MLP with ReLU, batch 128 (an MNIST-sized classifier)."""
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512),
                          nn.ReLU(), nn.Linear(512, 10))
    x, y = torch.randn(batch, 1, 28, 28), torch.randint(0, 10, (batch,))
    return model, lambda: (x, y), F.cross_entropy


class BasicBlock(nn.Module):
    """ResNet basic block: conv-bn-relu-conv-bn + identity/projection shortcut."""

    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.short = nn.Sequential()
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                       nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + self.short(x))


class SmallResNet(nn.Module):
    """A CIFAR-style ResNet-10 (widths 32/64/128), 32x32 inputs."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32),
                                  nn.ReLU(inplace=True))
        self.layers = nn.Sequential(BasicBlock(32, 32), BasicBlock(32, 64, 2),
                                    BasicBlock(64, 128, 2), BasicBlock(128, 128))
        self.fc = nn.Linear(128, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def make_cnn(batch: int = 32) -> tuple[nn.Module, Callable[[], Batch], Callable]:
    """ResNet-style CNN on 32x32 images, batch 32."""
    x, y = torch.randn(batch, 3, 32, 32), torch.randint(0, 10, (batch,))
    return SmallResNet(), lambda: (x, y), F.cross_entropy


class Encoder(nn.Module):
    """Embedding + 2 TransformerEncoder layers (d=128, 4 heads) + mean-pool classifier."""

    def __init__(self, vocab: int = 1000, d: int = 128, classes: int = 10) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.1, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.fc = nn.Linear(d, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.enc(self.emb(x)).mean(1))


def make_transformer(batch: int = 16,
                     seq: int = 64) -> tuple[nn.Module, Callable[[], Batch], Callable]:
    """Small transformer encoder classifier, batch 16 x 64 tokens."""
    x, y = torch.randint(0, 1000, (batch, seq)), torch.randint(0, 10, (batch,))
    return Encoder(), lambda: (x, y), F.cross_entropy


def make_small_mlp(batch: int = 32) -> tuple[nn.Module, Callable[[], Batch], Callable]:
    """6 hidden layers of 128 with ReLU, batch 32: about 0.5-1 ms a step, many small ops."""
    layers: list[nn.Module] = []
    for _ in range(6):
        layers += [nn.Linear(128, 128), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(128, 10))
    x, y = torch.randn(batch, 128), torch.randint(0, 10, (batch,))
    return model, lambda: (x, y), F.cross_entropy


class Episode(nn.Module):
    """A REINFORCE episode as pytorch/examples writes it: one forward of a small policy per
    state, an action sampled from a Categorical, its log-probability kept for the loss."""

    def __init__(self, steps: int = 50) -> None:
        super().__init__()
        self.policy = nn.Sequential(nn.Linear(4, 128), nn.Dropout(0.6), nn.ReLU(),
                                    nn.Linear(128, 2), nn.Softmax(dim=-1))
        self.steps = steps

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        log_probs = []
        for t in range(self.steps):
            probs = self.policy(states[t:t + 1])
            dist = torch.distributions.Categorical(probs)
            action = dist.sample()
            log_probs.append(dist.log_prob(action))
        return torch.cat(log_probs)


def make_reinforce(steps: int = 50) -> tuple[nn.Module, Callable[[], Batch], Callable]:
    """One episode of 50 one-state forwards per optimizer step; the loss is -sum(log p * G)."""
    states = torch.randn(steps, 4)
    rewards = torch.ones(steps)
    returns = torch.flip(torch.cumsum(torch.flip(rewards, [0]) * 0.99, 0), [0])
    returns = (returns - returns.mean()) / (returns.std() + 1e-8)

    def loss_fn(log_probs: torch.Tensor, ret: torch.Tensor) -> torch.Tensor:
        return -(log_probs * ret).sum()

    return Episode(steps), lambda: (states, returns), loss_fn


MODELS = {"small": make_small_mlp, "mlp": make_mlp, "cnn": make_cnn,
          "transformer": make_transformer, "reinforce": make_reinforce}
