"""AquaLoRA ppft_train: the frozen message decoder is also passed to the optimizer; it never gets a gradient.

source: https://github.com/Georgefwt/AquaLoRA/issues/4
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class LoRALinear(nn.Module):
    def __init__(self, base, rank=2):
        super().__init__()
        self.base = base
        self.lora_down = nn.Linear(base.in_features, rank, bias=False)
        self.lora_up = nn.Linear(rank, base.out_features, bias=False)
        nn.init.zeros_(self.lora_up.weight)

    def forward(self, x):
        return self.base(x) + self.lora_up(self.lora_down(x))


torch.manual_seed(0)
unet = LoRALinear(nn.Linear(16, 16))
unet.base.requires_grad_(False)
msgdecoder = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
msgdecoder.requires_grad_(False)
params_to_optimize = list(unet.lora_down.parameters()) + list(unet.lora_up.parameters()) + list(msgdecoder.parameters())
optimizer = torch.optim.AdamW(params_to_optimize, lr=1e-3, weight_decay=1e-2)
for step in range(3):
    latents = torch.randn(4, 16)
    msg = torch.randint(0, 2, (4, 8)).float()
    decoded = msgdecoder(unet(latents))
    loss = F.binary_cross_entropy_with_logits(decoded, msg) + F.mse_loss(unet(latents), latents)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
