"""Linear probing: the backbone is never frozen with requires_grad, but only the probe is optimized.

source: https://github.com/BINE022/EEGPT/issues/18
kind: lookalike
"""
import torch
import torch.nn as nn


class LitEEGPTCausal(nn.Module):
    def __init__(self):
        super().__init__()
        self.chan_conv = nn.Conv1d(6, 4, 1)
        self.target_encoder = nn.Sequential(nn.Linear(16, 16), nn.GELU())
        self.linear_probe1 = nn.Linear(16, 8)
        self.linear_probe2 = nn.Linear(4 * 8, 2)

    def forward(self, x):
        x = self.chan_conv(x)
        self.target_encoder.eval()
        z = self.target_encoder(x)
        h = self.linear_probe1(z).flatten(1)
        return self.linear_probe2(h)


torch.manual_seed(0)
model = LitEEGPTCausal()
optimizer = torch.optim.AdamW(
    list(model.chan_conv.parameters()) +
    list(model.linear_probe1.parameters()) +
    list(model.linear_probe2.parameters()),
    weight_decay=0.01)
x, y = torch.randn(8, 6, 16), torch.randint(0, 2, (8,))
for _ in range(5):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
