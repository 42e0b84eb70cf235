"""torchtitan's SimpleFSDP data_parallel() with the fix proposed in PR 4282 (and in PR 4267 for the spmd path): each distributed parameter is re-registered as nn.Parameter(..., requires_grad=p.requires_grad), so the weights the builder froze (embedding and base projection of a LoRA-style fine-tune) stay frozen and only the adapters and output head train.

source: https://github.com/pytorch/torchtitan/issues/3885
kind: lookalike
"""
from dataclasses import dataclass

import torch
import torch.nn as nn


@dataclass
class ModelArgs:
    vocab_size: int = 64
    dim: int = 16
    lora_rank: int = 4
    freeze_base: bool = True


class LoRALinear(nn.Module):
    def __init__(self, dim, rank):
        super().__init__()
        self.base = nn.Linear(dim, dim, bias=False)
        self.lora_a = nn.Linear(dim, rank, bias=False)
        self.lora_b = nn.Linear(rank, dim, bias=False)

    def forward(self, x):
        return self.base(x) + self.lora_b(self.lora_a(x))


class TinyLM(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.tok_embeddings = nn.Embedding(args.vocab_size, args.dim)
        self.proj = LoRALinear(args.dim, args.lora_rank)
        self.output = nn.Linear(args.dim, args.vocab_size, bias=False)

    def forward(self, tokens):
        return self.output(torch.tanh(self.proj(self.tok_embeddings(tokens))))


def build_model(args: ModelArgs) -> TinyLM:
    model = TinyLM(args)
    if args.freeze_base:
        model.tok_embeddings.weight.requires_grad_(False)
        model.proj.base.weight.requires_grad_(False)
    return model


def distribute_tensor(tensor, device_mesh=None, placements=None):
    """Single-process stand-in for torch.distributed.tensor.distribute_tensor: a replica of the data."""
    return tensor.detach().clone()


def data_parallel(model, device_mesh=None, mode="replicate"):
    param_sharding = None
    for mod in model.modules():
        params_dict = dict(mod.named_parameters(recurse=False))
        for p_name, p in params_dict.items():
            if p is not None and p.numel() > 0:
                mod.register_parameter(p_name, nn.Parameter(distribute_tensor(p, device_mesh, param_sharding),
                                                            requires_grad=p.requires_grad))
    return model


def build_optimizer(model, lr=5e-2):
    return torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)


torch.manual_seed(0)
args = ModelArgs()
model = build_model(args)
print("trainable before", sum(p.requires_grad for p in model.parameters()))
model = data_parallel(model)
print("trainable after", sum(p.requires_grad for p in model.parameters()), "of", len(list(model.parameters())))
optimizer = build_optimizer(model)
emb0 = model.tok_embeddings.weight.detach().clone()
base0 = model.proj.base.weight.detach().clone()
for step in range(10):
    tokens = torch.randint(0, args.vocab_size, (8, 12))
    logits = model(tokens[:, :-1])
    loss = nn.functional.cross_entropy(logits.reshape(-1, args.vocab_size), tokens[:, 1:].reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("frozen embedding moved", (model.tok_embeddings.weight - emb0).norm().item(),
      "frozen base moved", (model.proj.base.weight - base0).norm().item())
