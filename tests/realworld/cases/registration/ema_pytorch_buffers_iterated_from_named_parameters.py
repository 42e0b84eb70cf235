"""ema-pytorch EMA.get_buffers_iter walks model.named_parameters(), so no buffer name matches and the EMA model's BatchNorm statistics are never copied or averaged.

source: https://github.com/lucidrains/ema-pytorch/issues/8
kind: bug
symptom: silent
verified: after 30 training steps the online BatchNorm running_mean reaches 1.01 (max abs) while the EMA model's is still all zeros (0.0); iterating named_buffers() gives the EMA copy a running_mean of 0.84 (max abs)
"""
import copy

import torch
from torch import nn


class EMA(nn.Module):
    def __init__(self, model, beta=0.9999, update_after_step=10, update_every=5):
        super().__init__()
        self.beta = beta
        self.online_model = model
        self.ema_model = copy.deepcopy(model)
        self.ema_model.requires_grad_(False)
        self.parameter_names = {name for name, param in self.ema_model.named_parameters() if param.dtype == torch.float}
        self.buffer_names = {name for name, buffer in self.ema_model.named_buffers() if buffer.dtype == torch.float}
        self.update_every = update_every
        self.update_after_step = update_after_step
        self.register_buffer('step', torch.tensor([0]))

    def get_params_iter(self, model):
        for name, param in model.named_parameters():
            if name not in self.parameter_names:
                continue
            yield name, param

    def get_buffers_iter(self, model):
        for name, buffer in model.named_parameters():  # ROOT
            if name not in self.buffer_names:
                continue
            yield name, buffer

    def copy_params_from_model_to_ema(self):
        for (_, ma_params), (_, current_params) in zip(self.get_params_iter(self.ema_model), self.get_params_iter(self.online_model)):
            ma_params.data.copy_(current_params.data)
        for (_, ma_buffers), (_, current_buffers) in zip(self.get_buffers_iter(self.ema_model), self.get_buffers_iter(self.online_model)):
            ma_buffers.data.copy_(current_buffers.data)

    def update(self):
        step = self.step.item()
        self.step += 1
        if (step % self.update_every) != 0:
            return
        if step <= self.update_after_step:
            self.copy_params_from_model_to_ema()
            return
        self.update_moving_average(self.ema_model, self.online_model)

    @torch.no_grad()
    def update_moving_average(self, ma_model, current_model):
        current_decay = 0.9
        for (name, current_params), (_, ma_params) in zip(self.get_params_iter(current_model), self.get_params_iter(ma_model)):
            ma_params.data.lerp_(current_params.data, 1. - current_decay)
        for (name, current_buffer), (_, ma_buffer) in zip(self.get_buffers_iter(current_model), self.get_buffers_iter(ma_model)):
            ma_buffer.data.lerp_(current_buffer.data, 1. - current_decay)


torch.manual_seed(0)
net = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 1))
ema = EMA(net)
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
for step in range(30):
    x = torch.randn(16, 8) + 1.0
    loss = net(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    ema.update()
print(net[1].running_mean.abs().max().item(), ema.ema_model[1].running_mean.abs().max().item())
