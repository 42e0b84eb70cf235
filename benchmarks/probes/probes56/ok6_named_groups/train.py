import torch
import torch.nn.functional as F
from models import Net
from optim import build_optimizer

net = Net()
opt = build_optimizer(net, lr=1e-2)
w0 = net.layers[0].ff.weight.detach().clone()
for _ in range(4):
    x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
    loss = F.cross_entropy(net(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("blocks moved", (net.layers[0].ff.weight - w0).abs().max().item())
