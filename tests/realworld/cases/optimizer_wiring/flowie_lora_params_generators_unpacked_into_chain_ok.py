"""ControlLDM.configure_optimizers as in the LoRA reference code: the list of per-layer parameters() generators returned by inject_trainable_lora is unpacked into itertools.chain(*self.unet_lora_params, params), so the optimizer receives the LoRA tensors themselves.

source: https://github.com/EternalEvan/FlowIE/issues/11
kind: lookalike
verified: the optimizer holds the 4 LoRA tensors plus the control model's 2, and the LoRA up weights change after one step
"""
import itertools

import torch
import torch.nn as nn


class LoraInjectedLinear(nn.Module):
    def __init__(self, linear, r=4):
        super().__init__()
        self.linear = linear
        self.lora_down = nn.Linear(linear.in_features, r, bias=False)
        self.lora_up = nn.Linear(r, linear.out_features, bias=False)
        nn.init.zeros_(self.lora_up.weight)

    def forward(self, x):
        return self.linear(x) + self.lora_up(self.lora_down(x))


def inject_trainable_lora(model, target_replace_module=("Attention",), r=4):
    require_grad_params, names = [], []
    for name, module in model.named_modules():
        if module.__class__.__name__ not in target_replace_module:
            continue
        for child_name, child in list(module.named_children()):
            if isinstance(child, nn.Linear):
                module._modules[child_name] = LoraInjectedLinear(child, r)
                require_grad_params.append(module._modules[child_name].lora_up.parameters())
                require_grad_params.append(module._modules[child_name].lora_down.parameters())
                names.append(child_name)
    return require_grad_params, names


class Attention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.to_q = nn.Linear(dim, dim)
        self.to_v = nn.Linear(dim, dim)

    def forward(self, x):
        return torch.softmax(self.to_q(x) @ x.transpose(-1, -2), -1) @ self.to_v(x)


class ControlLDM(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.unet = nn.Sequential(Attention(dim), nn.Linear(dim, dim))
        self.control_model = nn.Linear(dim, dim)
        self.unet.requires_grad_(False)
        self.unet_lora_params, self.train_names = inject_trainable_lora(self.unet)
        self.learning_rate = 1e-4

    def configure_optimizers(self):
        lr = self.learning_rate
        params = list(self.control_model.parameters())
        opt = torch.optim.AdamW(itertools.chain(*self.unet_lora_params, params), lr=lr)
        return opt


model = ControlLDM()
opt = model.configure_optimizers()
x = torch.randn(2, 5, 8)
loss = (model.unet(x) + model.control_model(x)).pow(2).mean()
opt.zero_grad()
loss.backward()
opt.step()
print(sum(len(g['params']) for g in opt.param_groups))
