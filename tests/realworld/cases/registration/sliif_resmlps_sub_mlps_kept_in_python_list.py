"""SLIIF RESMLPS stores its ten sub-MLPs as self.mlps = [RES_MLP(...) for _ in range(10)], a plain Python list, so their weights are not registered: model.parameters() leaves them out and the optimizer never updates them, though they are used in forward and get gradients.

source: https://github.com/LianpoWang/SLIIF/issues/13
kind: bug
symptom: silent
verified: Adam holds 6 parameter tensors of the 66 used in forward; after 3 steps mlps[0].layers[0].weight has a gradient (max abs 0.0062) but is unchanged (0.0); with nn.ModuleList Adam holds all 66 and it moves 0.0030 (max abs)
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class RES_MLP(nn.Module):
    def __init__(self, in_dim, out_dim, hidden_list):
        super().__init__()
        dims = [in_dim] + hidden_list
        self.layers = nn.ModuleList([nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:])])
        self.out = nn.Linear(dims[-1], out_dim)

    def forward(self, x):
        for layer in self.layers:
            x = F.relu(layer(x))
        return self.out(x)


class COOD_MLP(nn.Module):
    def __init__(self, in_dim, out_dim, hidden_list):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_dim, hidden_list[0]), nn.ReLU(), nn.Linear(hidden_list[0], out_dim))

    def forward(self, x):
        return self.net(x)


class RESMLPS(nn.Module):
    def __init__(self, in_dim, out_dim, hidden_list, coord_hidden_list):
        super().__init__()
        self.mlps = [RES_MLP(in_dim, out_dim, coord_hidden_list) for _ in range(10)]  # ROOT
        self.cood_mlp = COOD_MLP(2, 16, hidden_list)
        self.expansionNet = nn.Linear(in_dim + 16, 10)

    def forward(self, x, coord):
        cood_feat = self.cood_mlp(coord)
        weights = torch.softmax(self.expansionNet(torch.cat([x, cood_feat], dim=-1)), dim=-1)
        outs = torch.stack([mlp(x) for mlp in self.mlps], dim=-1)
        return (outs * weights.unsqueeze(-2)).sum(-1)


torch.manual_seed(0)
model = RESMLPS(in_dim=8, out_dim=3, hidden_list=[16], coord_hidden_list=[16, 16])
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
print(len(optimizer.param_groups[0]['params']))
before = model.mlps[0].layers[0].weight.detach().clone()
for step in range(3):
    feat, coord, gt = torch.randn(64, 8), torch.rand(64, 2) * 2 - 1, torch.rand(64, 3)
    pred = model(feat, coord)
    loss = F.l1_loss(pred, gt)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(model.mlps[0].layers[0].weight.grad.abs().max().item(), (model.mlps[0].layers[0].weight - before).abs().max().item())
