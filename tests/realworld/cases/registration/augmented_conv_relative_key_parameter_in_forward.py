"""AugmentedConv creates its relative-position key as an nn.Parameter inside forward; it is never trained.

source: https://github.com/leaderj1001/Attention-Augmented-Conv2d/issues/7
kind: bug
symptom: silent
verified: no key_rel_w in model.named_parameters(); a fresh random key every forward, never updated
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

device = torch.device("cpu")


class AugmentedConv(nn.Module):
    def __init__(self, in_channels, out_channels, dk, dv, Nh):
        super(AugmentedConv, self).__init__()
        self.dk, self.dv, self.Nh = dk, dv, Nh
        self.conv_out = nn.Conv2d(in_channels, out_channels - dv, 3, padding=1)
        self.qkv_conv = nn.Conv2d(in_channels, 2 * dk + dv, kernel_size=1)
        self.attn_out = nn.Conv2d(dv, dv, 1)

    def forward(self, x):
        batch, _, height, width = x.size()
        conv_out = self.conv_out(x)
        q, k, v = torch.split(self.qkv_conv(x), [self.dk, self.dk, self.dv], dim=1)
        flat_q, flat_k, flat_v = (t.reshape(batch, self.Nh, -1, height * width) for t in (q, k, v))
        logits = torch.matmul(flat_q.transpose(2, 3), flat_k)
        logits = logits + self.relative_logits(q)
        weights = F.softmax(logits, dim=-1)
        attn_out = torch.matmul(weights, flat_v.transpose(2, 3)).reshape(batch, self.dv, height, width)
        return torch.cat((conv_out, self.attn_out(attn_out)), dim=1)

    def relative_logits(self, q):
        B, C, H, W = q.size()
        q = q.reshape(B, self.Nh, C // self.Nh, H * W)
        key_rel_w = nn.Parameter(torch.randn((H * W, C // self.Nh), requires_grad=True)).to(device)  # ROOT
        return torch.einsum("bhdx,yd->bhxy", q, key_rel_w)


torch.manual_seed(0)
model = AugmentedConv(in_channels=3, out_channels=8, dk=4, dv=4, Nh=2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, target = torch.randn(2, 3, 4, 4), torch.randn(2, 8, 4, 4)
for step in range(3):
    optimizer.zero_grad()
    loss = F.mse_loss(model(x), target)
    loss.backward()
    optimizer.step()
print([name for name, _ in model.named_parameters()])
