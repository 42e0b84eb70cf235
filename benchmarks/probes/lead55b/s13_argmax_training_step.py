"""A Lightning-style regression of class indices: the loss compares argmax'd predictions."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class OrdinalModel(nn.Module):
    def __init__(self, n_levels=5):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(7, 16), nn.ReLU(), nn.Linear(16, n_levels))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch):
        x, level = batch
        pred_level = self(x).argmax(dim=-1).float()  # ROOT
        return F.mse_loss(pred_level, level.float())

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


torch.manual_seed(0)
model = OrdinalModel()
opt = model.configure_optimizers()
for _ in range(3):
    batch = (torch.randn(8, 7), torch.randint(0, 5, (8,)))
    loss = model.training_step(batch)
    opt.zero_grad()
    loss.backward()
    opt.step()
