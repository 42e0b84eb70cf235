"""Unsupervised embedding learning (invariant and spreading instance feature): the original and augmented batches go through the same network object, so "both branches" share every weight and one optimizer over net.parameters() trains them.

source: https://github.com/mangye16/Unsupervised_Embedding_Learning/issues/5
kind: lookalike
verified: the shared fc weight is one Parameter, gets gradient from both branches, and changes after the step
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class BatchCriterion(nn.Module):
    def __init__(self, negM=1, T=0.1):
        super(BatchCriterion, self).__init__()
        self.negM, self.T = negM, T

    def forward(self, x):
        batch_size = x.size(0) // 2
        sim = torch.exp(torch.mm(x, x.t()) / self.T)
        pos = torch.cat([torch.diag(sim, batch_size), torch.diag(sim, -batch_size)])
        all_prob = sim.sum(1) - torch.diag(sim)
        return -(torch.log(pos / all_prob)).mean()


torch.manual_seed(0)
net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 16))
optimizer = torch.optim.SGD(net.parameters(), lr=0.03, momentum=0.9, weight_decay=5e-4)
criterion = BatchCriterion(1, 0.1)
before = net[4].weight.clone()
inputs1 = torch.rand(4, 3, 8, 8)
inputs2 = inputs1.flip(-1) + 0.05 * torch.randn_like(inputs1)
inputs = torch.cat((inputs1, inputs2), 0)
optimizer.zero_grad()
features = F.normalize(net(inputs), dim=1)
loss = criterion(features)
loss.backward()
optimizer.step()
print(len(list(net.parameters())) == 4, not torch.equal(before, net[4].weight))
