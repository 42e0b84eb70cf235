import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class DeepMLP(nn.Module):
    def __init__(self, width=32, depth=4):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(depth))
        self.out = nn.Linear(width, 1)
        self.use_checkpoint = True

    def forward(self, x):
        for blk in self.blocks:
            if self.use_checkpoint:
                x = checkpoint(blk, x, use_reentrant=True)  # ROOT
            else:
                x = blk(x)
        return self.out(x)


model = DeepMLP()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
w0 = model.blocks[0][0].weight.clone()
for _ in range(3):
    x, y = torch.randn(8, 32), torch.randn(8, 1)
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("first block moved:", (model.blocks[0][0].weight - w0).abs().max().item())
