"""APPFL's client optimizer clips the gradient norm after optimizer.step(), so with clip_grad enabled the local updates use unclipped gradients (the fix moves the clip before the step).

source: https://github.com/APPFL/APPFL/pull/198
kind: bug
symptom: silent
verified: with clip_value = 1.0 the gradient norm the optimizer steps on is 3.16, 2.34 and 1.66 at the 3 local steps (nothing is clipped); with the clip before optimizer.step() it is 1.0 each time
"""
import copy

import torch
import torch.nn as nn


class ClientOptim:
    def __init__(self, id, weight, model, loss_fn, dataloader, optim="SGD", num_local_epochs=1,
                 optim_args={"lr": 0.1}, clip_grad=True, clip_value=1.0, clip_norm=2):
        self.id = id
        self.weight = weight
        self.model = model
        self.loss_fn = loss_fn
        self.dataloader = dataloader
        self.optim = optim
        self.num_local_epochs = num_local_epochs
        self.optim_args = optim_args
        self.clip_grad = clip_grad
        self.clip_value = clip_value
        self.clip_norm = clip_norm

    def update(self):
        self.model.train()
        optimizer = getattr(torch.optim, self.optim)(self.model.parameters(), **self.optim_args)
        for t in range(self.num_local_epochs):
            for data, target in self.dataloader:
                optimizer.zero_grad()
                output = self.model(data)
                loss = self.loss_fn(output, target)
                loss.backward()
                optimizer.step()
                if self.clip_grad:
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip_value,  # ROOT
                                                   norm_type=self.clip_norm)
        return copy.deepcopy(self.model.state_dict())


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
dataloader = [(torch.randn(16, 10) * 3, torch.randint(0, 3, (16,))) for _ in range(3)]
client = ClientOptim(0, 1.0, model, nn.CrossEntropyLoss(), dataloader)
local_state = client.update()
