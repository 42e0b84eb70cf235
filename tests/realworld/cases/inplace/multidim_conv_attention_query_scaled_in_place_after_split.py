"""Attention-augmented conv splits qkv with torch.split, reshapes q into heads, then scales it with q *= dkh ** -0.5.

source: https://github.com/HansBambel/multidim_conv/issues/2
kind: bug
symptom: crash
verified: RuntimeError: Output 0 of ReshapeAlias is a view and is being modified inplace. This view is the output of a function that returns multiple views
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class AugmentedConv(nn.Module):
    def __init__(self, in_channels, dk=8, dv=8, Nh=2):
        super().__init__()
        self.dk, self.dv, self.Nh = dk, dv, Nh
        self.qkv_conv = nn.Conv2d(in_channels, 2 * dk + dv, kernel_size=1)
        self.attn_out = nn.Conv2d(dv, dv, kernel_size=1)

    def split_heads_2d(self, x, Nh):
        batch, channels, height, width = x.size()
        return torch.reshape(x, (batch, Nh, channels // Nh, height, width))

    def compute_flat_qkv(self, x, dk, dv, Nh):
        qkv = self.qkv_conv(x)
        N, _, H, W = qkv.size()
        q, k, v = torch.split(qkv, [dk, dk, dv], dim=1)
        q = self.split_heads_2d(q, Nh)
        k = self.split_heads_2d(k, Nh)
        v = self.split_heads_2d(v, Nh)
        dkh = dk // Nh
        q *= dkh ** -0.5  # ROOT
        flat_q = torch.reshape(q, (N, Nh, dk // Nh, H * W))
        flat_k = torch.reshape(k, (N, Nh, dk // Nh, H * W))
        flat_v = torch.reshape(v, (N, Nh, dv // Nh, H * W))
        return flat_q, flat_k, flat_v

    def forward(self, x):
        N, _, H, W = x.size()
        flat_q, flat_k, flat_v = self.compute_flat_qkv(x, self.dk, self.dv, self.Nh)
        logits = torch.matmul(flat_q.transpose(2, 3), flat_k)
        weights = torch.softmax(logits, dim=-1)
        attn = torch.matmul(weights, flat_v.transpose(2, 3))
        attn = attn.transpose(2, 3).reshape(N, self.dv, H, W)
        return self.attn_out(attn)


model = AugmentedConv(4)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
x, y = torch.randn(2, 4, 5, 5), torch.randn(2, 8, 5, 5)
loss = nn.functional.mse_loss(model(x), y)
optimizer.zero_grad()
loss.backward()
optimizer.step()
