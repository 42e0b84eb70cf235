"""diffusers' train_text_to_image_sdxl.py creates ema_unet = EMAModel(unet.parameters()) with --use_ema, but its training loop never calls ema_unet.step(unet.parameters()) after the optimizer step; at the end the script copies the EMA weights into the UNet before saving, so the saved pipeline holds the pretrained weights ("the EMA checkpoint never changed").

source: https://github.com/huggingface/diffusers/issues/5783
kind: bug
symptom: silent
verified: after 40 steps the trained UNet is 1.59 (L2) away from the pretrained weights but the saved (EMA) weights are 0.0 away, and their loss on a held-out batch is 2.410, the pretrained model's, against 1.869 for the trained UNet; with ema_unet.step() after each synchronised step (as in train_text_to_image.py) the saved weights are 1.42 away and score 1.951
"""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F


class EMAModel:
    def __init__(self, parameters, decay=0.95, min_decay=0.0, update_after_step=0):
        self.shadow_params = [p.clone().detach() for p in parameters]
        self.decay, self.min_decay, self.update_after_step = decay, min_decay, update_after_step
        self.optimization_step = 0

    def get_decay(self, optimization_step):
        step = max(0, optimization_step - self.update_after_step - 1)
        if step <= 0:
            return 0.0
        return max(min((1 + step) / (10 + step), self.decay), self.min_decay)

    @torch.no_grad()
    def step(self, parameters):
        self.optimization_step += 1
        one_minus_decay = 1 - self.get_decay(self.optimization_step)
        for s_param, param in zip(self.shadow_params, parameters):
            s_param.sub_(one_minus_decay * (s_param - param))

    def copy_to(self, parameters):
        for s_param, param in zip(self.shadow_params, parameters):
            param.data.copy_(s_param.to(param.device).data)


class UNet2DConditionModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv_in = nn.Conv2d(4, 16, 3, padding=1)
        self.mid = nn.Conv2d(16, 16, 3, padding=1)
        self.conv_out = nn.Conv2d(16, 4, 3, padding=1)

    def forward(self, sample, timesteps):
        h = F.silu(self.conv_in(sample))
        h = F.silu(self.mid(h) + timesteps.view(-1, 1, 1, 1) / 1000)
        return self.conv_out(h)


def flat(params):
    return torch.cat([p.detach().flatten() for p in params])


torch.manual_seed(0)
unet = UNet2DConditionModel()
pretrained = copy.deepcopy(unet)
ema_unet = EMAModel(unet.parameters())
optimizer = torch.optim.AdamW(unet.parameters(), lr=1e-3)
target_map = torch.randn(4, 4, 3, 3) * 0.3
gradient_accumulation_steps, global_step = 1, 0
for step in range(40):
    latents = torch.randn(4, 4, 8, 8)
    timesteps = torch.randint(0, 1000, (4,)).float()
    target = F.conv2d(latents, target_map, padding=1)
    loss = F.mse_loss(unet(latents, timesteps), target)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    sync_gradients = (step + 1) % gradient_accumulation_steps == 0
    if sync_gradients:  # ROOT
        global_step += 1

val_latents, val_t = torch.randn(8, 4, 8, 8), torch.randint(0, 1000, (8,)).float()
val_target = F.conv2d(val_latents, target_map, padding=1)
with torch.no_grad():
    trained_loss = F.mse_loss(unet(val_latents, val_t), val_target).item()
    pretrained_loss = F.mse_loss(pretrained(val_latents, val_t), val_target).item()
trained_dist = (flat(unet.parameters()) - flat(pretrained.parameters())).norm().item()
ema_unet.copy_to(unet.parameters())  # the script saves the EMA weights
with torch.no_grad():
    saved_loss = F.mse_loss(unet(val_latents, val_t), val_target).item()
saved_dist = (flat(unet.parameters()) - flat(pretrained.parameters())).norm().item()
print("trained", trained_dist, trained_loss, "saved", saved_dist, saved_loss, "pretrained", pretrained_loss)
