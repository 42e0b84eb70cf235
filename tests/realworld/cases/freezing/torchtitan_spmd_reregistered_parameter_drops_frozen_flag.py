"""torchtitan's Module._spmd_distribute_state re-registers every distributed parameter as nn.Parameter(tensor), whose requires_grad defaults to True whatever the tensor's flag: the LoRA converter froze the base weights before Module.parallelize(), the re-registered base weights come back trainable, the optimizer built afterwards from the parameters that require grad takes them in, and the frozen base weights are updated.

source: https://github.com/pytorch/torchtitan/pull/4267
kind: bug
symptom: silent
verified: before parallelize() 4 of 6 parameters require grad, after it 6 of 6 and the optimizer holds 6; after 5 AdamW steps the frozen base weight of w1 has changed by 0.0051 (max abs); with requires_grad passed to nn.Parameter (the fix) the optimizer holds 4 and the base weight changes by 0.0
"""
from dataclasses import dataclass, field

import torch
from torch import nn


def spmd_distribute_tensor(tensor, mesh, layout):  # stands for spmd_types on a 1-rank mesh: a new tensor, no autograd history
    return tensor.detach().clone()


@dataclass
class ShardingConfig:
    state_shardings: dict = field(default_factory=dict)


@dataclass
class ParallelDims:
    spmd_backend: str = "spmd_types"


class Module(nn.Module):  # torchtitan.protocols.module.Module, reduced to the state distribution
    _sharding_config = None

    def parallelize(self, parallel_dims):
        for child in self.children():
            if isinstance(child, Module):
                child.parallelize(parallel_dims)
        if self._sharding_config is None:
            return
        self._distribute_states(parallel_dims)

    def _spmd_distribute_state(self, parallel_dims, name, tensor, layout, *, is_param):
        mesh = None  # a named 1-rank mesh in torchtitan
        tensor = spmd_distribute_tensor(tensor, mesh, layout)
        if is_param:
            self.register_parameter(name, nn.Parameter(tensor))  # ROOT
        else:
            self.register_buffer(name, tensor)

    def _distribute_states(self, parallel_dims):
        sharding_config = self._sharding_config
        for name, param in list(self.named_parameters(recurse=False)):
            spmd_layout = sharding_config.state_shardings.get(name)
            if spmd_layout is None:
                raise ValueError(f"{type(self).__name__}.{name} has no placement declared")
            if parallel_dims.spmd_backend == "spmd_types":
                self._spmd_distribute_state(parallel_dims, name, param, spmd_layout, is_param=True)


class LoRALinear(Module):  # what the LoRA converter swaps in: frozen base weight plus trainable low-rank factors
    def __init__(self, in_features, out_features, rank=2):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features) * 0.1)
        self.lora_a = nn.Parameter(torch.randn(rank, in_features) * 0.1)
        self.lora_b = nn.Parameter(torch.zeros(out_features, rank))
        self.weight.requires_grad_(False)  # the converter freezes the base weight
        self._sharding_config = ShardingConfig({n: "Replicate" for n in ("weight", "lora_a", "lora_b")})

    def forward(self, x):
        return x @ self.weight.T + (x @ self.lora_a.T) @ self.lora_b.T


class Model(Module):
    def __init__(self):
        super().__init__()
        self.w1 = LoRALinear(8, 8)
        self.w2 = LoRALinear(8, 4)

    def forward(self, x):
        return self.w2(torch.relu(self.w1(x)))


torch.manual_seed(0)
model = Model()
print("trainable before parallelize:", sum(p.requires_grad for p in model.parameters()), "of", len(list(model.parameters())))
model.parallelize(ParallelDims())
print("trainable after parallelize:", sum(p.requires_grad for p in model.parameters()))
optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3, weight_decay=0.1)
print("parameters in the optimizer:", sum(len(g["params"]) for g in optimizer.param_groups))
base_before = model.w1.weight.detach().clone()
x, y = torch.randn(16, 8), torch.randn(16, 4)
for step in range(5):
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("frozen base weight change (max abs):", (model.w1.weight.detach() - base_before).abs().max().item())
