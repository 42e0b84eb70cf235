"""pytorch-LBCNN's `ConvLBP` layer after the fix: the sparse {-1, 0, +1} anchor weights are wrapped in `nn.Parameter` first and `requires_grad = False` is set on the parameter afterwards, so the flag sticks, the optimizer built from the trainable parameters leaves the anchors alone, and only the batch norm, 1x1 convolutions, stem and head learn.

source: https://github.com/eeric/pytorch-LBCNN/issues/1
kind: lookalike
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


class ConvLBP(nn.Conv2d):
    def __init__(self, in_channels, out_channels, kernel_size=3, sparsity=0.5):
        super().__init__(in_channels, out_channels, kernel_size, padding=1, bias=False)
        shape = (out_channels, in_channels, kernel_size, kernel_size)
        signs = torch.bernoulli(torch.full(shape, 0.5)) * 2 - 1
        mask = torch.bernoulli(torch.full(shape, sparsity))
        weights = signs * mask
        self.weight = nn.Parameter(weights)
        self.weight.requires_grad = False


class BlockLBP(nn.Module):
    def __init__(self, channels, anchors):
        super().__init__()
        self.bn = nn.BatchNorm2d(channels)
        self.conv_lbp = ConvLBP(channels, anchors)
        self.conv_1x1 = nn.Conv2d(anchors, channels, 1)

    def forward(self, x):
        return x + self.conv_1x1(torch.relu(self.conv_lbp(self.bn(x))))


class LBCNN(nn.Module):
    def __init__(self, channels=8, anchors=16, depth=2, classes=4):
        super().__init__()
        self.stem = nn.Conv2d(1, channels, 3, padding=1)
        self.blocks = nn.Sequential(*[BlockLBP(channels, anchors) for _ in range(depth)])
        self.head = nn.Linear(channels, classes)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)).mean((2, 3)))


model = LBCNN()
anchors = [m.weight for m in model.modules() if isinstance(m, ConvLBP)]
start = [a.detach().clone() for a in anchors]
opt = torch.optim.SGD(filter(lambda p: p.requires_grad, model.parameters()), lr=0.05, momentum=0.9)
images = torch.randn(64, 1, 8, 8)
labels = (images[:, 0, :4].mean((1, 2)) > 0).long() + 2 * (images[:, 0, :, :4].mean((1, 2)) > 0).long()
for step in range(60):
    loss = nn.functional.cross_entropy(model(images), labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
distinct = torch.cat([a.detach().flatten() for a in anchors]).unique().numel()
moved = max((a - s).abs().max().item() for a, s in zip(anchors, start))
print(f"anchor weight requires_grad: {anchors[0].requires_grad}")
print(f"distinct anchor values: {distinct} (at init: {torch.cat([s.flatten() for s in start]).unique().numel()})")
print(f"anchor weights moved by {moved:.4g}; final loss {loss.item():.4f}")
