"""normflows' AffineConstFlow builds its scale and its shift from one tensor, `init = torch.zeros(shape)[None]`, `self.s = nn.Parameter(init)`, `self.t = nn.Parameter(init)`: both parameters wrap the same storage, so every optimizer update of one is also applied to the other and the learned scale and shift stay identical.

source: https://github.com/VincentStimper/normalizing-flows/commit/13c1989b62552be43b25060f7571ef274ad33b3f
kind: bug
symptom: silent
verified: after 200 steps of forward-KL training the flow's s and t are equal (max |s - t| 0.0; about 1.8 with the fix) and the forward KL stays about 8.1 (4.4 with the fix)
"""
import numpy as np
import torch
from torch import nn


class Flow(nn.Module):
    pass


class AffineConstFlow(Flow):
    """scales and shifts with learned constants per dimension"""

    def __init__(self, shape, scale=True, shift=True):
        super().__init__()
        init = torch.zeros(shape)[None]
        if scale:
            self.s = nn.Parameter(init)
        else:
            self.register_buffer('s', init)
        if shift:
            self.t = nn.Parameter(init)  # ROOT
        else:
            self.register_buffer('t', init)
        self.n_dim = self.s.dim()
        self.batch_dims = torch.nonzero(torch.tensor(self.s.shape) == 1, as_tuple=False)[:, 0].tolist()

    def forward(self, z):
        z_ = z * torch.exp(self.s) + self.t
        prod_batch_dims = np.prod([z.size(i) for i in self.batch_dims[1:]]) if len(self.batch_dims) > 1 else 1
        log_det = prod_batch_dims * torch.sum(self.s)
        return z_, log_det

    def inverse(self, z):
        z_ = (z - self.t) * torch.exp(-self.s)
        prod_batch_dims = np.prod([z.size(i) for i in self.batch_dims[1:]]) if len(self.batch_dims) > 1 else 1
        log_det = -prod_batch_dims * torch.sum(self.s)
        return z_, log_det


class DiagGaussian(nn.Module):  # fixed standard normal base distribution
    def __init__(self, d):
        super().__init__()
        self.d = d

    def log_prob(self, z):
        return -0.5 * self.d * np.log(2 * np.pi) - 0.5 * torch.sum(z ** 2, 1)


class NormalizingFlow(nn.Module):
    def __init__(self, q0, flows):
        super().__init__()
        self.q0 = q0
        self.flows = nn.ModuleList(flows)

    def forward_kld(self, x):
        log_q = torch.zeros(len(x), device=x.device)
        z = x
        for i in range(len(self.flows) - 1, -1, -1):
            z, log_det = self.flows[i].inverse(z)
            log_q += log_det
        log_q += self.q0.log_prob(z)
        return -torch.mean(log_q)


torch.manual_seed(0)
model = NormalizingFlow(DiagGaussian(2), [AffineConstFlow((2,))])
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
target_loc, target_scale = torch.tensor([3.0, -2.0]), torch.tensor([0.5, 2.0])
for it in range(200):
    x = target_loc + target_scale * torch.randn(256, 2)
    optimizer.zero_grad()
    loss = model.forward_kld(x)
    loss.backward()
    optimizer.step()
flow = model.flows[0]
print("final forward KL estimate:", round(loss.item(), 3))
print("s:", flow.s.detach().view(-1).tolist(), "t:", flow.t.detach().view(-1).tolist())
print("max |s - t|:", (flow.s - flow.t).abs().max().item())
