"""RA-CNN's rank loss reduced with .mean() as in the fix from the issue, so each backward gets a scalar.

source: https://github.com/dillondavis/RecurrentAttentionConvolutionalNeuralNetwork/issues/4
kind: lookalike
verified: trains with batch_size 32; every scale's Linear receives a gradient
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class RankLoss(nn.Module):
    def __init__(self, margin=0.05):
        super().__init__()
        self.margin = margin

    def forward(self, scores1, scores2, target):
        ps1 = F.softmax(scores1, dim=1).gather(1, target.long().view(-1, 1))
        ps2 = F.softmax(scores2, dim=1).gather(1, target.long().view(-1, 1))
        return torch.clamp(ps1 - ps2 + self.margin, min=0).mean()


class Manager:
    def __init__(self, model, batch_size):
        self.model, self.batch_size = model, batch_size
        self.criterion_rank = RankLoss()

    def do_batch(self, optimizer, batch, label):
        optimizer.zero_grad()
        scores = [scale(batch) for scale in self.model]
        for i in range(1, len(scores)):
            retain_graph = i < len(scores) - 1
            self.criterion_rank(scores[i - 1], scores[i], label).backward(retain_graph=retain_graph)
        optimizer.step()


torch.manual_seed(0)
model = nn.ModuleList([nn.Linear(10, 5) for _ in range(3)])
manager = Manager(model, batch_size=32)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
manager.do_batch(optimizer, torch.randn(32, 10), torch.randint(0, 5, (32,)))
print([p.grad is not None for p in model.parameters()])
