import torch
import torch.nn as nn
import torch.nn.functional as F


class ProtoNet(nn.Module):
    def __init__(self, n_protos=6, dim=8):
        super().__init__()
        self.embed = nn.Linear(10, dim)
        self.n_protos, self.dim = n_protos, dim
        self.reset_prototypes()

    def reset_prototypes(self):
        self.prototypes = torch.empty(self.n_protos, self.dim).normal_().requires_grad_()  # ROOT

    def forward(self, x):
        z = F.normalize(self.embed(x), dim=-1)
        return z @ F.normalize(self.prototypes, dim=-1).t()


net = ProtoNet()
opt = torch.optim.SGD(net.parameters(), lr=0.5)
before = net.prototypes.detach().clone()
for _ in range(3):
    x, y = torch.randn(12, 10), torch.randint(0, 6, (12,))
    loss = F.cross_entropy(net(x) / 0.1, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("prototypes moved:", not torch.equal(before, net.prototypes))
