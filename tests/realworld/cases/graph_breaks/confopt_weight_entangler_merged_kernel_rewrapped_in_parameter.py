"""ConfigurableOptimizer's WeightEntangler (weight-entangled NAS) builds the merged kernel of the candidate convolutions, new_weight = sum(alpha_k * slice_k(largest_op.weight)), and runs the largest operation with largest_op.weight = nn.Parameter(new_weight): the new Parameter is a fresh leaf, so the backward stops there and neither the architecture parameters nor the largest convolution's own weight (restored right after the forward) receive the entangled operations' gradient.

source: https://github.com/automl/ConfigurableOptimizer/pull/82
kind: bug
symptom: silent
verified: after loss.backward() the 5x5 convolution's weight.grad is None and after 5 SGD steps its weight has changed by 0.0 (the architecture gradient, [0.0108, -0.0054, -0.0054], comes only through the softmax and the skip candidate); with the merged kernel kept in the graph (the fix) the weight's gradient has norm 0.3954, it changes by 0.0532 and the architecture gradient is [0.0108, -0.005, -0.0057]
"""
from __future__ import annotations

from collections import defaultdict

import torch
from torch import nn
import torch.nn.functional as F


class WeightEntanglementModule(nn.Module):
    pass


class ConvolutionalWEModule(WeightEntanglementModule):
    def __init__(self, C, kernel_size, stride=1):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride
        self.op = nn.Sequential(nn.ReLU(), nn.Conv2d(C, C, kernel_size, stride, padding=kernel_size // 2, bias=False),
                                nn.BatchNorm2d(C, affine=False))
        self.op[1].can_entangle_weight = True

    def forward(self, x):
        return self.op(x)


class WeightEntangler:  # OneShotComponent base, the checks and the LoRA branch left out
    def _slice_kernel_weight(self, weight, sub_kernel_size):
        start = padding = (weight.shape[-1] - sub_kernel_size) // 2
        end = start + sub_kernel_size
        weight_slice = weight[:, :, start:end, start:end]
        return F.pad(weight_slice, (padding, padding, padding, padding))

    def _get_weight_entangle_ops(self, candidate_op):
        return {idx: op for idx, op in enumerate(candidate_op.op.children())
                if getattr(op, "can_entangle_weight", False) is True}

    def _get_entanglement_op_sets(self, modules):
        entanglement_set = defaultdict(list)
        for module in modules:
            for idx, op in self._get_weight_entangle_ops(module).items():
                entanglement_set[idx].append(op)
        return dict(entanglement_set)

    def _forward_entangled_ops(self, x, entangled_modules):
        # Step 1, store the alphas in the operations
        for module in entangled_modules:
            for op in self._get_weight_entangle_ops(module).values():
                op._entangle_alpha = module._alpha
        # Step 2, sort the modules in decreasing order of kernel size
        entangled_modules = sorted(entangled_modules, key=lambda m: m.kernel_size, reverse=True)
        largest_module = entangled_modules[0]
        entanglement_ops_sets = self._get_entanglement_op_sets(entangled_modules)
        # Step 3, create the merged weight and assign it to the largest kernel
        self.original_weights = {}
        for idx, entangle_ops_set in entanglement_ops_sets.items():
            largest_op = entangle_ops_set[0]
            self.original_weights[idx] = largest_op.weight
            sub_kernel_weights = [largest_op.weight * largest_op._entangle_alpha]
            for op in entangle_ops_set[1:]:
                sliced_weight = self._slice_kernel_weight(largest_op.weight, op.kernel_size[0])
                sub_kernel_weights.append(sliced_weight * op._entangle_alpha)
            new_weight = sum(sub_kernel_weights)
            largest_op.weight = nn.Parameter(new_weight)  # ROOT
        # Step 4 - Forward pass through the module with the largest kernel
        output = largest_module(x)
        # Step 5 - Restore original weights to the largest kernel
        for idx, entangle_ops_set in entanglement_ops_sets.items():
            entangle_ops_set[0].weight = self.original_weights[idx]
        return output

    def forward(self, x, operations, alphas):
        for candidate_op, alpha in zip(operations, alphas):
            candidate_op._alpha = alpha
        non_we_outputs = [op(x) * op._alpha for op in operations if not isinstance(op, WeightEntanglementModule)]
        we_ops = [op for op in operations if isinstance(op, WeightEntanglementModule)]
        return sum(non_we_outputs) + self._forward_entangled_ops(x, we_ops)


class SkipConnection(nn.Module):
    def forward(self, x):
        return x


torch.manual_seed(0)
C = 4
operations = nn.ModuleList([SkipConnection(), ConvolutionalWEModule(C, 3), ConvolutionalWEModule(C, 5)])
arch_parameters = nn.Parameter(1e-3 * torch.randn(3))
head = nn.Conv2d(C, 2, 1)
entangler = WeightEntangler()
optimizer = torch.optim.SGD(list(operations.parameters()) + list(head.parameters()) + [arch_parameters], lr=0.1)
x, y = torch.randn(4, C, 8, 8), torch.randint(0, 2, (4, 8, 8))
conv5 = operations[2].op[1]
before = conv5.weight.detach().clone()
for step in range(5):
    out = entangler.forward(x, list(operations), F.softmax(arch_parameters, dim=-1))
    loss = F.cross_entropy(head(out), y)
    optimizer.zero_grad()
    loss.backward()
    if step == 0:
        print("5x5 conv weight.grad:", None if conv5.weight.grad is None else round(conv5.weight.grad.norm().item(), 4),
              "architecture grad:", [round(g, 4) for g in arch_parameters.grad.tolist()])
    optimizer.step()
print("5x5 conv weight change after 5 steps:", round((conv5.weight - before).abs().max().item(), 4))
