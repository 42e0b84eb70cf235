"""GSCNN shape stream with the edge loss taken on the logits cs (binary_cross_entropy_with_logits applies the sigmoid itself); edge_out is kept for visualisation.

source: https://github.com/nv-tlabs/GSCNN/issues/62
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class GSCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.dsn = nn.Conv2d(3, 8, 3, padding=1)
        self.fuse = nn.Conv2d(8, 1, 1)
        self.sigmoid = nn.Sigmoid()

    def forward(self, inp):
        cs = self.fuse(F.relu(self.dsn(inp)))
        edge_out = self.sigmoid(cs)
        return edge_out, cs


class JointEdgeSegLoss(nn.Module):
    def bce2d(self, input, target):
        n, c, h, w = input.size()
        log_p = input.transpose(1, 2).transpose(2, 3).contiguous().view(1, -1)
        target_t = target.transpose(1, 2).transpose(2, 3).contiguous().view(1, -1)
        pos_index = (target_t == 1)
        neg_index = (target_t == 0)
        weight = torch.zeros(log_p.size())
        pos_num, neg_num = pos_index.sum().item(), neg_index.sum().item()
        sum_num = pos_num + neg_num
        weight[pos_index] = neg_num * 1.0 / sum_num
        weight[neg_index] = pos_num * 1.0 / sum_num
        return F.binary_cross_entropy_with_logits(log_p, target_t, weight, reduction='mean')

    def forward(self, edgein, edgemask):
        return 20 * self.bce2d(edgein, edgemask)


torch.manual_seed(0)
net = GSCNN()
criterion = JointEdgeSegLoss()
optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
for step in range(3):
    inputs = torch.randn(2, 3, 16, 16)
    edge = (torch.rand(2, 1, 16, 16) > 0.9).float()
    edge_out, cs = net(inputs)
    loss = criterion(cs, edge)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
