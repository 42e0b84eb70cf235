"""GLiNER2's pair consistency loss unchanged, with the model trained in float32 (the case the pull request reports as unaffected): 1.0 - 1e-6 is representable, the clamp keeps saturated probabilities below 1 and the gradients are finite.

source: https://github.com/fastino-ai/GLiNER2/pull/155
kind: lookalike
"""
import torch
import torch.nn as nn


def marginal_pair_consistency_loss(probabilities, pair_index, num_pairs, targets, pair_mask):
    log_survival = torch.log1p(-probabilities.clamp(max=1.0 - 1e-6))
    summed = torch.zeros(num_pairs, dtype=log_survival.dtype).scatter_add_(0, pair_index, log_survival)
    marginal = 1 - torch.exp(summed)
    return ((marginal - targets) ** 2 * pair_mask).sum() / pair_mask.sum().clamp(min=1)


class BoundaryModel(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.encoder = nn.Linear(16, hidden)
        self.boundary_head = nn.Linear(hidden, 1)  # freshly initialised submodule
        with torch.no_grad():
            self.boundary_head.weight.mul_(40.0)

    def forward(self, x):
        return torch.sigmoid(self.boundary_head(torch.tanh(self.encoder(x))).squeeze(-1))


torch.manual_seed(0)
model = BoundaryModel()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(24, 16)
pair_index = torch.arange(24) // 3
num_pairs = 8
targets = torch.rand(num_pairs)
pair_mask = (torch.arange(num_pairs) % 2 == 0).float()

probabilities = model(x)
print("saturated probabilities", int((probabilities == 1).sum()))
loss = marginal_pair_consistency_loss(probabilities, pair_index, num_pairs, targets, pair_mask)
optimizer.zero_grad()
loss.backward()
print("loss", loss.item(), "non-finite grads", sum(int(not torch.isfinite(p.grad).all()) for p in model.parameters()),
      "of", len(list(model.parameters())), "encoder grad norm", model.encoder.weight.grad.float().norm().item())
optimizer.step()
print("encoder weights finite after step", bool(torch.isfinite(model.encoder.weight).all()))
