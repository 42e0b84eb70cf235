"""The same DPF block with the mask applied through an autograd Function (Masker) whose backward passes the gradient to the dense weight (the author's fix): the dense weights are never overwritten, pruned entries keep receiving the feedback update and can be regrown.

source: https://github.com/INCHEON-CHO/Dynamic_Model_Pruning_with_Feedback/issues/1
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Mask(nn.Module):
    def __init__(self, shape):
        super().__init__()
        self.register_buffer('weight', torch.ones(shape))


class Masker(torch.autograd.Function):
    """Masked weight in the forward, the gradient passed to every dense weight (the feedback)."""

    @staticmethod
    def forward(ctx, weight, mask):
        return weight * mask

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, None


class BasicBlock(nn.Module):
    def __init__(self, planes):
        super().__init__()
        self.conv1 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.mask1 = Mask(self.conv1.weight.shape)
        self.bn1 = nn.BatchNorm2d(planes)

    def forward(self, x):
        weight = Masker.apply(self.conv1.weight, self.mask1.weight)
        out = F.conv2d(x, weight, padding=1)
        return F.relu(self.bn1(out) + x)


def update_mask(block, keep=0.5):
    w = block.conv1.weight.detach().abs().flatten()
    threshold = w.kthvalue(int(w.numel() * (1 - keep))).values
    old = block.mask1.weight.clone()
    block.mask1.weight.copy_((block.conv1.weight.detach().abs() > threshold).float())
    return int(((old == 0) & (block.mask1.weight == 1)).sum())


torch.manual_seed(0)
block = BasicBlock(4)
head = nn.Linear(4, 1)
opt = torch.optim.SGD(list(block.parameters()) + list(head.parameters()), lr=0.1, momentum=0.9)
x, y = torch.randn(16, 4, 6, 6), torch.randn(16, 1)
regrown = 0
for step in range(40):
    if step % 10 == 0:
        regrown += update_mask(block)
    loss = F.mse_loss(head(block(x).mean((2, 3))), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
pruned = block.conv1.weight.detach()[block.mask1.weight == 0]
print(step, round(loss.item(), 4), 'regrown', regrown, 'pruned norm', pruned.norm().item())
