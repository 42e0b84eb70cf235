import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.feat = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
        self.norm = nn.LayerNorm(16)
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        return self.head(self.norm(self.feat(x)))


def clip_hook(module, grad_input, grad_output):
    # keep gradients flowing through the norm bounded
    return tuple(torch.zeros_like(g) if g is not None and g.abs().max() > 1e-3 else g for g in grad_input)  # ROOT


net = Net()
net.norm.register_full_backward_hook(clip_hook)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
w0 = net.feat[0].weight.clone()
for _ in range(4):
    x, y = torch.randn(8, 8), torch.randint(0, 3, (8,))
    loss = nn.functional.cross_entropy(net(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("feat moved:", (net.feat[0].weight - w0).abs().max().item())
