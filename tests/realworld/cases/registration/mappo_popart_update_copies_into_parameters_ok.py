"""PopArt.update writing the new statistics and the rescaled output layer into the registered parameters with copy_ under no_grad (the layer is rescaled before the value forward): the parameters stay registered and the value head trains.

source: https://github.com/marlbenchmark/on-policy/issues/19
kind: lookalike
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class PopArt(torch.nn.Module):

    def __init__(self, input_shape, output_shape, norm_axes=1, beta=0.99999, epsilon=1e-5, device=torch.device("cpu")):
        super(PopArt, self).__init__()
        self.beta = beta
        self.epsilon = epsilon
        self.norm_axes = norm_axes
        self.tpdv = dict(dtype=torch.float32, device=device)
        self.input_shape = input_shape
        self.output_shape = output_shape
        self.weight = nn.Parameter(torch.Tensor(output_shape, input_shape).to(**self.tpdv))
        self.bias = nn.Parameter(torch.Tensor(output_shape).to(**self.tpdv))
        self.stddev = nn.Parameter(torch.ones(output_shape).to(**self.tpdv), requires_grad=False)
        self.mean = nn.Parameter(torch.zeros(output_shape).to(**self.tpdv), requires_grad=False)
        self.mean_sq = nn.Parameter(torch.zeros(output_shape).to(**self.tpdv), requires_grad=False)
        self.debiasing_term = nn.Parameter(torch.tensor(0.0).to(**self.tpdv), requires_grad=False)
        self.reset_parameters()

    def reset_parameters(self):
        torch.nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = torch.nn.init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in)
            torch.nn.init.uniform_(self.bias, -bound, bound)
        self.mean.zero_()
        self.mean_sq.zero_()
        self.debiasing_term.zero_()

    def forward(self, input_vector):
        if type(input_vector) == np.ndarray:
            input_vector = torch.from_numpy(input_vector)
        input_vector = input_vector.to(**self.tpdv)
        return F.linear(input_vector, self.weight, self.bias)

    @torch.no_grad()
    def update(self, input_vector):
        if type(input_vector) == np.ndarray:
            input_vector = torch.from_numpy(input_vector)
        input_vector = input_vector.to(**self.tpdv)
        old_mean, old_var = self.debiased_mean_var()
        old_stddev = torch.sqrt(old_var)
        batch_mean = input_vector.mean(dim=tuple(range(self.norm_axes)))
        batch_sq_mean = (input_vector ** 2).mean(dim=tuple(range(self.norm_axes)))
        self.mean.mul_(self.beta).add_(batch_mean * (1.0 - self.beta))
        self.mean_sq.mul_(self.beta).add_(batch_sq_mean * (1.0 - self.beta))
        self.debiasing_term.mul_(self.beta).add_(1.0 * (1.0 - self.beta))
        self.stddev.copy_((self.mean_sq - self.mean ** 2).sqrt().clamp(min=1e-4))
        new_mean, new_var = self.debiased_mean_var()
        new_stddev = torch.sqrt(new_var)
        self.weight.copy_(self.weight * old_stddev / new_stddev)
        self.bias.copy_((old_stddev * self.bias + old_mean - new_mean) / new_stddev)

    def debiased_mean_var(self):
        debiased_mean = self.mean / self.debiasing_term.clamp(min=self.epsilon)
        debiased_mean_sq = self.mean_sq / self.debiasing_term.clamp(min=self.epsilon)
        debiased_var = (debiased_mean_sq - debiased_mean ** 2).clamp(min=1e-2)
        return debiased_mean, debiased_var

    def normalize(self, input_vector):
        mean, var = self.debiased_mean_var()
        return (input_vector - mean[(None,) * self.norm_axes]) / torch.sqrt(var)[(None,) * self.norm_axes]


torch.manual_seed(0)
base = nn.Sequential(nn.Linear(10, 16), nn.ReLU())
v_out = PopArt(16, 1)
optimizer = torch.optim.Adam(list(base.parameters()) + list(v_out.parameters()), lr=5e-4)
for update in range(3):
    share_obs, return_batch = torch.randn(32, 10), torch.randn(32, 1) * 5 + 2
    v_out.update(return_batch)
    values = v_out(base(share_obs))
    value_loss = F.mse_loss(values, v_out.normalize(return_batch))
    optimizer.zero_grad()
    value_loss.backward()
    optimizer.step()
print(update, value_loss.item())
