"""The Moore-AnimateAnyone stage-1 loop with the reference banks cleared after every micro-step (inside the accumulate block), so each micro-step's denoising attention reads only the reference features of its own forward, and gradient accumulation only defers the optimizer step.

source: https://github.com/MooreThreads/Moore-AnimateAnyone/issues/92
kind: lookalike
"""
from contextlib import contextmanager

import torch
import torch.nn as nn
import torch.nn.functional as F


class BankedAttention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.to_q, self.to_k, self.to_v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.bank = []
        self.mode = None

    def forward(self, hidden_states):
        if self.mode == "write":
            self.bank.append(hidden_states.clone())
            context = hidden_states
        elif self.mode == "read":
            context = torch.cat([hidden_states] + self.bank, dim=1)
        else:
            context = hidden_states
        q, k, v = self.to_q(hidden_states), self.to_k(context), self.to_v(context)
        attn = torch.softmax(q @ k.transpose(1, 2) / q.shape[-1] ** 0.5, dim=-1)
        return hidden_states + attn @ v


class UNet(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.conv_in = nn.Linear(4, dim)
        self.attn = BankedAttention(dim)
        self.conv_out = nn.Linear(dim, 4)

    def forward(self, x):
        return self.conv_out(self.attn(self.conv_in(x)))


class ReferenceAttentionControl:
    def __init__(self, unet, mode):
        self.attn = unet.attn
        self.attn.mode = mode

    def update(self, writer):
        self.attn.bank = [v.clone() for v in writer.attn.bank]

    def clear(self):
        self.attn.bank.clear()


class Accelerator:
    def __init__(self, gradient_accumulation_steps):
        self.gradient_accumulation_steps, self.step = gradient_accumulation_steps, 0
        self.sync_gradients = True

    @contextmanager
    def accumulate(self, model):
        self.step += 1
        self.sync_gradients = self.step % self.gradient_accumulation_steps == 0
        yield

    def backward(self, loss):
        (loss / self.gradient_accumulation_steps).backward()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.reference_unet = UNet()
        self.denoising_unet = UNet()


torch.manual_seed(0)
net = Net()
reference_control_writer = ReferenceAttentionControl(net.reference_unet, mode="write")
reference_control_reader = ReferenceAttentionControl(net.denoising_unet, mode="read")
accelerator = Accelerator(gradient_accumulation_steps=2)
optimizer = torch.optim.AdamW(net.parameters(), lr=1e-4)
global_step = 0
for step in range(4):
    ref_image_latents, noisy_latents, target = torch.randn(2, 8, 4), torch.randn(2, 8, 4), torch.randn(2, 8, 4)
    with accelerator.accumulate(net):
        net.reference_unet(ref_image_latents)
        reference_control_reader.update(reference_control_writer)
        model_pred = net.denoising_unet(noisy_latents)
        loss = F.mse_loss(model_pred, target)
        accelerator.backward(loss)
        if accelerator.sync_gradients:
            optimizer.step()
            optimizer.zero_grad()
        reference_control_reader.clear()
        reference_control_writer.clear()
    if accelerator.sync_gradients:
        global_step += 1
    print(step, loss.item())
