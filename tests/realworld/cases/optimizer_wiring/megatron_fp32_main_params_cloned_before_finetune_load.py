"""Megatron-LM finetune: the mixed-precision optimizer clones fp32 main params before the checkpoint is loaded.

source: https://github.com/NVIDIA/Megatron-LM/issues/174
kind: bug
symptom: silent
verified: after the first step the model weights are the random init plus one update, not the loaded checkpoint
"""
import argparse
import torch
import torch.nn as nn


class Float16OptimizerWithFloat16Params:
    def __init__(self, optimizer):
        self.optimizer = optimizer
        self.float16_groups, self.fp32_from_float16_groups = [], []
        for param_group in self.optimizer.param_groups:
            float16_params, fp32_params = [], []
            for i, param in enumerate(param_group['params']):
                main_param = param.detach().clone().float()
                param_group['params'][i] = main_param
                float16_params.append(param)
                fp32_params.append(main_param)
            self.float16_groups.append(float16_params)
            self.fp32_from_float16_groups.append(fp32_params)

    def zero_grad(self):
        for group in self.float16_groups:
            for p in group:
                p.grad = None

    def step(self):
        for model_group, main_group in zip(self.float16_groups, self.fp32_from_float16_groups):
            for model_param, main_param in zip(model_group, main_group):
                main_param.grad = model_param.grad.float()
        self.optimizer.step()
        with torch.no_grad():
            for model_group, main_group in zip(self.float16_groups, self.fp32_from_float16_groups):
                for model_param, main_param in zip(model_group, main_group):
                    model_param.copy_(main_param)


def get_model():
    return nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8)).to(torch.bfloat16)


def setup_model_and_optimizer(args, checkpoint):
    model = get_model()
    optimizer = Float16OptimizerWithFloat16Params(torch.optim.Adam(model.parameters(), lr=1e-4))  # ROOT
    if args.finetune:
        model.load_state_dict(checkpoint)
    return model, optimizer


torch.manual_seed(0)
pretrained = get_model().state_dict()
args = argparse.Namespace(finetune=True)
model, optimizer = setup_model_and_optimizer(args, pretrained)
for iteration in range(2):
    x = torch.randn(4, 8, dtype=torch.bfloat16)
    loss = (model(x).float() - x.float()).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
