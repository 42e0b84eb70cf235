import torch
import torch.nn as nn


class AutoEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(6, 2)
        self.decoder = nn.Linear(2, 6)

    def forward(self, x):
        return self.decoder(self.encoder(x))


ae = AutoEncoder()
opt = torch.optim.SGD(ae.parameters(), lr=0.1)
for _ in range(4):
    x = torch.randn(5, 6)
    ae.encoder.zero_grad()  # ROOT
    loss = nn.functional.mse_loss(ae(x), x)
    loss.backward()
    opt.step()
