import torch
import torch.nn as nn
import torch.nn.functional as F


class LitRegressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(7, 14), nn.SiLU(), nn.Linear(14, 1))

    def forward(self, x):
        return self.net(x)

    def _shared_step(self, batch):
        x, y = batch
        return F.smooth_l1_loss(self(x), y)

    def training_step(self, batch, batch_idx):
        return {"loss": self._shared_step(batch)}

    @torch.no_grad()
    def validation_step(self, batch, batch_idx):
        return self._shared_step(batch)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


module = LitRegressor()
opt = module.configure_optimizers()
loader = [(torch.randn(8, 7), torch.randn(8, 1)) for _ in range(3)]
for i, batch in enumerate(loader):
    out = module.training_step(batch, i)
    opt.zero_grad()
    out["loss"].backward()
    opt.step()
print("val:", module.validation_step(loader[0], 0).item())
