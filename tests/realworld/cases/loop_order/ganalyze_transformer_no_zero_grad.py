"""GANalyze trains its latent-space transformer with optimizer.step() but no optimizer.zero_grad().

source: https://github.com/LoreGoetschalckx/GANalyze/issues/7
kind: bug
symptom: silent
verified: transformer.w.grad holds the sum of every batch's gradient
"""
import torch
import torch.nn as nn


class OneDirection(nn.Module):
    def __init__(self, dim_z):
        super().__init__()
        self.w = nn.Parameter(torch.randn(1, dim_z) * 0.01)

    def transform(self, z, alpha):
        return z + alpha.view(-1, 1) * self.w


torch.manual_seed(0)
dim_z = 6
generator = nn.Linear(dim_z, 10).requires_grad_(False)
assessor = nn.Linear(10, 1).requires_grad_(False)
transformer = OneDirection(dim_z)
optimizer = torch.optim.Adam(transformer.parameters(), lr=2e-4)
criterion = nn.MSELoss()
batch_size = 8
for batch_start in range(0, 40, batch_size):
    z = torch.randn(batch_size, dim_z)
    alpha = torch.rand(batch_size) * 2 - 1
    out_scores = assessor(generator(z)).squeeze(-1)
    target_scores = out_scores + alpha
    z_transformed = transformer.transform(z, alpha)
    out_scores_transformed = assessor(generator(z_transformed)).squeeze(-1)
    loss = criterion(out_scores_transformed, target_scores)
    loss.backward()  # ROOT
    optimizer.step()
