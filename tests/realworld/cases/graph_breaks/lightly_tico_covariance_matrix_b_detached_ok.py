"""lightly's TiCoLoss after PR 1484 detaches the auxiliary matrix B = z_a.T @ z_a / N before it enters the covariance estimate C, so the covariance estimate is a constant of the loss and the gradient reaches the backbone through the embeddings only.

source: https://github.com/lightly-ai/lightly/pull/1484
kind: lookalike
"""
import copy

import torch


class TiCoLoss(torch.nn.Module):  # the gather_distributed branch is left out
    def __init__(self, beta=0.9, rho=8.0):
        super(TiCoLoss, self).__init__()
        self.beta = beta
        self.rho = rho
        self.C = None

    def forward(self, z_a, z_b, update_covariance_matrix=True):
        assert z_a.shape[0] > 1 and z_b.shape[0] > 1
        assert z_a.shape == z_b.shape
        z_a = torch.nn.functional.normalize(z_a, dim=1)
        z_b = torch.nn.functional.normalize(z_b, dim=1)
        # compute auxiliary matrix B
        B = torch.mm(z_a.T, z_a).detach() / z_a.shape[0]
        if self.C is None:
            self.C = B.new_zeros(B.shape).detach()
        C = self.beta * self.C + (1 - self.beta) * B
        transformative_invariance_loss = 1.0 - (z_a * z_b).sum(dim=1).mean()
        covariance_contrast_loss = self.rho * (torch.mm(z_a, C) * z_a).sum(dim=1).mean()
        loss = transformative_invariance_loss + covariance_contrast_loss
        if update_covariance_matrix:
            self.C = C.detach()
        return loss


def tico_reference(z_a, z_b, C_prev, beta=0.9, rho=8.0):  # the loss with B and the EMA covariance held constant
    z_a, z_b = torch.nn.functional.normalize(z_a, dim=1), torch.nn.functional.normalize(z_b, dim=1)
    C = beta * C_prev + (1 - beta) * (z_a.T @ z_a / z_a.shape[0]).detach()
    return 1.0 - (z_a * z_b).sum(dim=1).mean() + rho * ((z_a @ C) * z_a).sum(dim=1).mean()


torch.manual_seed(0)
backbone = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16))
backbone_momentum = copy.deepcopy(backbone).requires_grad_(False)
criterion = TiCoLoss()
optimizer = torch.optim.SGD(backbone.parameters(), lr=0.06)
for step in range(3):
    x0, x1 = torch.randn(32, 10), torch.randn(32, 10)
    C_prev = torch.zeros(16, 16) if criterion.C is None else criterion.C.clone()
    z_a, z_b = backbone(x0), backbone_momentum(x1)
    loss = criterion(z_a, z_b)
    grad, = torch.autograd.grad(loss, backbone[0].weight, retain_graph=True)
    ref_grad, = torch.autograd.grad(tico_reference(backbone(x0), z_b, C_prev), backbone[0].weight)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("loss", round(loss.item(), 4), "first layer grad norm", round(grad.norm().item(), 4),
      "difference from the gradient with B constant", round((grad - ref_grad).norm().item(), 4))
