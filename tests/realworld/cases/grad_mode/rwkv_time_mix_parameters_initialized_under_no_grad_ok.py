"""RWKV-v5 channel mixing: the time-mix ratios are computed inside `with torch.no_grad():` in __init__ and wrapped in nn.Parameter there; the no_grad block only covers the initialisation, so the parameters are leaves that train (the maintainer: "these parameters are trainable").

source: https://github.com/BlinkDL/RWKV-LM/pull/213
kind: lookalike
verified: time_mix_k and time_mix_r get gradients and change after the optimizer step
"""
import torch
import torch.nn as nn


class RWKV_ChannelMix(nn.Module):
    def __init__(self, n_embd, n_layer, layer_id, dim_ffn):
        super().__init__()
        self.time_shift = nn.ZeroPad2d((0, 0, 1, -1))
        with torch.no_grad():  # fancy init of time_mix
            ratio_1_to_almost0 = 1.0 - (layer_id / n_layer)  # 1 to ~0
            ddd = torch.ones(1, 1, n_embd)
            for i in range(n_embd):
                ddd[0, 0, i] = i / n_embd
            self.time_mix_k = nn.Parameter(torch.pow(ddd, ratio_1_to_almost0))
            self.time_mix_r = nn.Parameter(torch.pow(ddd, ratio_1_to_almost0))
        self.key = nn.Linear(n_embd, dim_ffn, bias=False)
        self.receptance = nn.Linear(n_embd, n_embd, bias=False)
        self.value = nn.Linear(dim_ffn, n_embd, bias=False)

    def forward(self, x):
        xx = self.time_shift(x)
        xk = x * self.time_mix_k + xx * (1 - self.time_mix_k)
        xr = x * self.time_mix_r + xx * (1 - self.time_mix_r)
        k = torch.relu(self.key(xk)) ** 2
        kv = self.value(k)
        return torch.sigmoid(self.receptance(xr)) * kv


torch.manual_seed(0)
block = RWKV_ChannelMix(n_embd=8, n_layer=4, layer_id=1, dim_ffn=16)
optimizer = torch.optim.Adam(block.parameters(), lr=1e-2)
before = block.time_mix_k.detach().clone()
for step in range(3):
    x = torch.randn(2, 5, 8)
    loss = (block(x) - x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(block.time_mix_k.grad is not None, not torch.equal(before, block.time_mix_k))
