"""Neurons frozen by a parameter hook that returns zero gradients, trained with SGD weight_decay.

source: https://github.com/pytorch/pytorch/issues/38581
kind: bug
symptom: silent
verified: every gradient is zero, yet model.weight changes at each step (weight decay shrinks it)
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class ActiveGradsHook:
    def __init__(self, name):
        self.name = name

    def __call__(self, grad):
        return torch.zeros(grad.shape)


def train(model):
    initial_weights = model.weight.clone()
    optimizer = torch.optim.SGD(model.parameters(), lr=1, momentum=0, weight_decay=1)  # ROOT
    inputs = torch.rand(2, 3)
    action_target = torch.rand(2, 2)
    action_output = model(inputs)
    loss = nn.MSELoss()(action_target, action_output)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print((model.weight - initial_weights).abs().max().item())


def train_new_neurons(model):
    for name, param in model.named_parameters():
        hook = ActiveGradsHook(name)
        param.register_hook(hook)
    train(model)


model = nn.Linear(3, 2)
train_new_neurons(model)
