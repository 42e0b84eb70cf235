"""sd-scripts' NetworkTrainer.get_noise_pred_and_target after commit 86a2f3f ("Fix gradient handling when Text Encoders are trained") calls the U-Net inside torch.set_grad_enabled(is_train): grad stays on through the frozen U-Net even when only the text encoder's LoRA is trained, so the loss keeps the text encoder's graph and the LoRA trains.

source: https://github.com/kohya-ss/sd-scripts/commit/86a2f3fd262e52b3249d9f5508efe4774f1fa3ed
kind: lookalike
"""
import contextlib
from types import SimpleNamespace

import torch
from torch import nn


class Accelerator:  # stands for accelerate.Accelerator on one CPU process
    def autocast(self):
        return contextlib.nullcontext()

    def backward(self, loss):
        loss.backward()


class LoRAModule(nn.Module):  # networks/lora.py, reduced
    def __init__(self, org_module, lora_dim=4):
        super().__init__()
        self.lora_down = nn.Linear(org_module.in_features, lora_dim, bias=False)
        self.lora_up = nn.Linear(lora_dim, org_module.out_features, bias=False)
        nn.init.zeros_(self.lora_up.weight)
        self.org_forward, org_module.forward = org_module.forward, self.forward

    def forward(self, x):
        return self.org_forward(x) + self.lora_up(self.lora_down(x))


class NetworkTrainer:  # latents caching, noise offset, v-parameterization, masked loss and loss weights left out
    def get_noise_pred_and_target(self, args, accelerator, latents, text_encoder_conds, unet, train_unet, is_train=True):
        noise = torch.randn_like(latents)
        timesteps = torch.randint(0, 1000, (latents.shape[0],))
        noisy_latents = latents + noise * (timesteps[:, None] / 1000)
        with torch.set_grad_enabled(is_train), accelerator.autocast():
            noise_pred = unet(torch.cat([noisy_latents.requires_grad_(train_unet), text_encoder_conds[0]], dim=-1))
        return noise_pred, noise

    def process_batch(self, batch, text_encoders, unet, accelerator, args, is_train=True, train_text_encoder=True,
                      train_unet=True):
        with torch.no_grad():
            latents = batch["latents"]
        with torch.set_grad_enabled(is_train and train_text_encoder), accelerator.autocast():
            text_encoder_conds = [text_encoders[0](batch["input_ids"]).mean(dim=1)]
        noise_pred, target = self.get_noise_pred_and_target(args, accelerator, latents, text_encoder_conds, unet,
                                                            train_unet, is_train=is_train)
        return torch.nn.functional.mse_loss(noise_pred.float(), target.float())


torch.manual_seed(0)
args = SimpleNamespace(network_train_text_encoder_only=True)
text_encoder = nn.Sequential(nn.Embedding(64, 8), nn.Linear(8, 8))  # stands for CLIP's text model
unet = nn.Sequential(nn.Linear(12, 16), nn.SiLU(), nn.Linear(16, 4))  # stands for the U-Net
text_encoder.requires_grad_(False)
unet.requires_grad_(False)
train_unet = not args.network_train_text_encoder_only
train_text_encoder = True
network = nn.ModuleList([LoRAModule(text_encoder[1])])  # network.apply_to(text_encoder, unet, True, train_unet)
optimizer = torch.optim.AdamW(network.parameters(), lr=1e-3)
accelerator, trainer = Accelerator(), NetworkTrainer()
for step in range(3):
    batch = {"latents": torch.randn(2, 4), "input_ids": torch.randint(0, 64, (2, 6))}
    loss = trainer.process_batch(batch, [text_encoder], unet, accelerator, args, is_train=True,
                                 train_text_encoder=train_text_encoder, train_unet=train_unet)
    accelerator.backward(loss)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    print(step, round(loss.item(), 4))
