"""GLiNER2's marginal_pair_consistency_loss clamps probabilities with probabilities.clamp(max=1.0 - 1e-6) before log1p(-p); in half precision 1.0 - 1e-6 rounds to exactly 1.0, so the clamp does nothing, a saturated probability gives log1p(-1.0) = -inf, the forward stays finite (1 - exp(-inf) = 1) and the backward multiplies a zero upstream gradient by an infinite derivative: NaN gradients on every parameter upstream.

source: https://github.com/fastino-ai/GLiNER2/pull/155
kind: bug
symptom: silent
verified: in bfloat16, with 4 of 24 probabilities saturated at 1.0, the loss prints finite (0.334) while all 4 parameters get NaN gradients and the encoder weights are NaN after one AdamW step; with the clamp and log1p in float32 (where 1 - 1e-6 is representable) the gradients are finite (encoder gradient norm 0.667) and the loss is 0.334
"""
import torch
import torch.nn as nn


def marginal_pair_consistency_loss(probabilities, pair_index, num_pairs, targets, pair_mask):
    log_survival = torch.log1p(-probabilities.clamp(max=1.0 - 1e-6))  # ROOT
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
model = BoundaryModel().to(torch.bfloat16)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(24, 16, dtype=torch.bfloat16)
pair_index = torch.arange(24) // 3
num_pairs = 8
targets = torch.rand(num_pairs, dtype=torch.bfloat16)
pair_mask = (torch.arange(num_pairs) % 2 == 0).to(torch.bfloat16)

probabilities = model(x)
print("saturated probabilities", int((probabilities == 1).sum()))
loss = marginal_pair_consistency_loss(probabilities, pair_index, num_pairs, targets, pair_mask)
optimizer.zero_grad()
loss.backward()
print("loss", loss.item(), "non-finite grads", sum(int(not torch.isfinite(p.grad).all()) for p in model.parameters()),
      "of", len(list(model.parameters())), "encoder grad norm", model.encoder.weight.grad.float().norm().item())
optimizer.step()
print("encoder weights finite after step", bool(torch.isfinite(model.encoder.weight).all()))
