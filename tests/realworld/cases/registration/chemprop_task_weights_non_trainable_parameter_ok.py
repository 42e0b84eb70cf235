"""Chemprop v2 MPNN: the task weights are an nn.Parameter with requires_grad=False, used only to weight the loss.

source: https://github.com/chemprop/chemprop/issues/657
kind: lookalike
"""
import torch
from torch import nn


class MPNN(nn.Module):
    def __init__(self, d_in, n_tasks, task_weights=None):
        super().__init__()
        self.message_passing = nn.Sequential(nn.Linear(d_in, 16), nn.ReLU())
        self.predictor = nn.Linear(16, n_tasks)
        task_weights = torch.ones(n_tasks) if task_weights is None else task_weights
        self.w_t = nn.Parameter(task_weights.unsqueeze(0), False)

    def forward(self, x):
        return self.predictor(self.message_passing(x))

    def training_step(self, batch):
        x, targets = batch
        preds = self(x)
        loss = ((preds - targets) ** 2 * self.w_t).mean()
        return loss


torch.manual_seed(0)
model = MPNN(d_in=6, n_tasks=2, task_weights=torch.tensor([1.0, 0.5]))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for batch in [(torch.randn(8, 6), torch.randn(8, 2)) for _ in range(3)]:
    loss = model.training_step(batch)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
