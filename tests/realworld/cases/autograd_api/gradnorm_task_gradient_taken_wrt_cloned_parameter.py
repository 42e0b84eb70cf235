"""GradNorm on a SimMIM backbone: the per-task gradient norm is computed with torch.autograd.grad(L1, param[0].clone(), ...), asking for the gradient of a fresh copy of the shared weight that the loss never used.

source: https://github.com/hosseinshn/GradNorm/issues/10
kind: bug
symptom: crash
verified: appears to not have been used in the graph
"""
import torch
import torch.nn as nn


class MTLModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.shared = nn.Linear(16, 16)
        self.recon_head = nn.Linear(16, 16)
        self.cls_head = nn.Linear(16, 4)

    def forward(self, x):
        h = torch.relu(self.shared(x))
        return self.recon_head(h), self.cls_head(h)


def train_one_epoch(model, data, optimizer, optimizer2, Weightloss1, Weightloss2, alpha=0.16):
    l01 = l02 = None
    for x, y in data:
        recon, logits = model(x)
        l1 = nn.functional.mse_loss(recon, x)
        l2 = nn.functional.cross_entropy(logits, y)
        L1, L2 = Weightloss1 * l1, Weightloss2 * l2
        if l01 is None:
            l01, l02 = l1.detach(), l2.detach()
        loss = (L1 + L2) / 2
        optimizer.zero_grad()
        loss.backward(retain_graph=True)
        param = list(model.parameters())
        G1R = torch.autograd.grad(L1, param[0].clone(), retain_graph=True, create_graph=True)  # ROOT
        G1 = torch.norm(G1R[0], 2)
        G2R = torch.autograd.grad(L2, param[0].clone(), retain_graph=True, create_graph=True)
        G2 = torch.norm(G2R[0], 2)
        G_avg = (G1 + G2) / 2
        lhat1, lhat2 = l1 / l01, l2 / l02
        lhat_avg = (lhat1 + lhat2) / 2
        inv_rate1, inv_rate2 = lhat1 / lhat_avg, lhat2 / lhat_avg
        C1 = (G_avg * inv_rate1 ** alpha).detach()
        C2 = (G_avg * inv_rate2 ** alpha).detach()
        optimizer2.zero_grad()
        Lgrad = torch.abs(G1 - C1) + torch.abs(G2 - C2)
        Lgrad.backward()
        optimizer2.step()
        optimizer.step()


torch.manual_seed(0)
model = MTLModel()
Weightloss1 = torch.tensor(1.0, requires_grad=True)
Weightloss2 = torch.tensor(1.0, requires_grad=True)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
optimizer2 = torch.optim.Adam([Weightloss1, Weightloss2], lr=1e-3)
data = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(2)]
train_one_epoch(model, data, optimizer, optimizer2, Weightloss1, Weightloss2)
