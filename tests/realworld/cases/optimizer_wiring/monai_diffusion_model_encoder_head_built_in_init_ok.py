"""MONAI's DiffusionModelEncoder after PR 8578: the classification head is built in __init__ from the input_shape argument, so it is among classifier.parameters() when the tutorial builds its Adam optimizer and it trains with the encoder.

source: https://github.com/Project-MONAI/MONAI/issues/8577
kind: lookalike
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


def get_timestep_embedding(timesteps, embedding_dim, max_period=10000):
    half_dim = embedding_dim // 2
    exponent = -math.log(max_period) * torch.arange(half_dim, dtype=torch.float32) / half_dim
    emb = timesteps[:, None].float() * torch.exp(exponent)[None, :]
    return torch.cat([torch.cos(emb), torch.sin(emb)], dim=-1)


class DownBlock(nn.Module):  # _ResnetBlock + Downsample reduced to conv, time shift, conv with stride 2
    def __init__(self, in_channels, out_channels, temb_channels):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.time_emb_proj = nn.Linear(temb_channels, out_channels)
        self.downsampler = nn.Conv2d(out_channels, out_channels, 3, stride=2, padding=1)

    def forward(self, hidden_states, temb, context=None):
        h = F.silu(self.conv1(hidden_states) + self.time_emb_proj(F.silu(temb))[:, :, None, None])
        return self.downsampler(h), [h]


class DiffusionModelEncoder(nn.Module):
    def __init__(self, spatial_dims=2, in_channels=1, out_channels=2, channels=(8, 16), input_shape=(16, 16)):
        super().__init__()
        self.block_out_channels = channels
        self.out_channels = out_channels
        self.conv_in = nn.Conv2d(in_channels, channels[0], 3, padding=1)
        time_embed_dim = channels[0] * 4
        self.time_embed = nn.Sequential(nn.Linear(channels[0], time_embed_dim), nn.SiLU(), nn.Linear(time_embed_dim, time_embed_dim))
        self.down_blocks = nn.ModuleList([DownBlock(i, o, time_embed_dim) for i, o in zip((channels[0],) + channels[:-1], channels)])
        out_spatial = [math.ceil(size / 2 ** len(channels)) for size in input_shape]
        self.out = nn.Sequential(nn.Linear(channels[-1] * math.prod(out_spatial), 512), nn.ReLU(), nn.Dropout(0.1), nn.Linear(512, self.out_channels))

    def forward(self, x, timesteps, context=None, class_labels=None):
        t_emb = get_timestep_embedding(timesteps, self.block_out_channels[0]).to(dtype=x.dtype)
        emb = self.time_embed(t_emb)
        h = self.conv_in(x)
        for downsample_block in self.down_blocks:
            h, _ = downsample_block(hidden_states=h, temb=emb, context=context)
        h = h.reshape(h.shape[0], -1)
        # 5. out
        output: torch.Tensor = self.out(h)
        return output


torch.manual_seed(0)
classifier = DiffusionModelEncoder()
optimizer = torch.optim.Adam(params=classifier.parameters(), lr=2.5e-4)
images = torch.randn(16, 1, 16, 16)
classes = (images.mean((1, 2, 3)) > 0).long()
conv_before = classifier.conv_in.weight.detach().clone()
for step in range(15):
    if step == 1:
        head_before = classifier.out[0].weight.detach().clone()
    timesteps = torch.randint(0, 1000, (16,))
    noisy_img = images + 0.1 * torch.randn_like(images)
    pred = classifier(noisy_img, timesteps)
    loss = F.cross_entropy(pred, classes)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
in_opt = {id(p) for group in optimizer.param_groups for p in group["params"]}
print("head tensors in the optimizer:", sum(id(p) in in_opt for p in classifier.out.parameters()), "of", len(list(classifier.out.parameters())),
      "| optimizer tensors:", len(in_opt))
print("head Linear moved (steps 1-14)", round((classifier.out[0].weight - head_before).norm().item(), 4),
      "| conv_in moved", round((classifier.conv_in.weight - conv_before).norm().item(), 4))
