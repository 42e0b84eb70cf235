"""zeta's decoupled_optimizer with the fix proposed in the issue: the no-decay list names each LayerNorm's f"{module_name}.weight", the parameter torch.nn.LayerNorm actually has.

source: https://github.com/kyegomez/zeta/issues/290
kind: lookalike
verified: the no-decay group holds the embedding and both LayerNorm weights
"""
import torch
import torch.nn as nn
from torch.nn import LayerNorm


class Transformer(nn.Module):
    def __init__(self, num_tokens=50, dim=16):
        super().__init__()
        self.emb = nn.Embedding(num_tokens, dim)
        self.norm1 = LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.norm2 = LayerNorm(dim)
        self.to_logits = nn.Linear(dim, num_tokens)

    def forward(self, x):
        h = self.emb(x)
        h = h + self.ff(self.norm1(h))
        return self.to_logits(self.norm2(h))


def decoupled_optimizer(model, learning_rate=1e-2, weight_decay=0.1, beta_1=0.9, beta_2=0.95):
    exclude_module = "emb"
    no_decay = []
    for module_name, module in model.named_modules():
        for ndim in [LayerNorm, torch.nn.Embedding]:
            if isinstance(module, ndim):
                if module_name == exclude_module:
                    no_decay.append(f"{module_name}.weight")
                else:
                    no_decay.append(f"{module_name}.weight")
                break
    decay = []
    for name, param in model.named_parameters():
        if name not in no_decay and param.requires_grad:
            decay.append(name)
    param_dict = {pn: p for pn, p in model.named_parameters()}
    optim_groups = [
        {"params": [param_dict[pn] for pn in decay], "weight_decay": weight_decay},
        {"params": [param_dict[pn] for pn in no_decay if pn in param_dict], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=(beta_1, beta_2))


torch.manual_seed(0)
model = Transformer()
optimizer = decoupled_optimizer(model)
for step in range(20):
    x = torch.randint(0, 50, (4, 12))
    loss = nn.functional.cross_entropy(model(x[:, :-1]).reshape(-1, 50), x[:, 1:].reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
