"""Input gradient of a residual block read from register_full_backward_hook.

source: https://github.com/pytorch/pytorch/issues/7040
kind: lookalike
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class BasicBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc1 = nn.Linear(dim, dim)
        self.fc2 = nn.Linear(dim, dim)

    def forward(self, x):
        out = torch.relu(self.fc1(x))
        out = self.fc2(out)
        return torch.relu(out + x)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(8, 16)
        self.block = BasicBlock(16)
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        return self.head(self.block(self.stem(x)))


gradients = {}


def save_input_grad(module, grad_input, grad_output):
    gradients['block_input'] = grad_input[0]


net = Net()
net.block.register_full_backward_hook(save_input_grad)
feats = {}
net.stem.register_forward_hook(lambda m, i, o: feats.__setitem__('stem', o))
x = torch.randn(4, 8)
scores = net(x)
scores[:, 0].sum().backward()
saliency = (gradients['block_input'] * feats['stem']).sum(dim=1)
print(saliency)
