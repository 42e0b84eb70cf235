"""A weight-loading helper calls torch.set_grad_enabled(False) to copy tensors and never restores it, so the training that follows builds no graph.

source: https://github.com/huggingface/transformers/pull/13257
kind: bug
symptom: crash
verified: RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
import torch.nn as nn


def tie_or_load_weights(model, state_dict):
    torch.set_grad_enabled(False)  # ROOT
    for name, param in model.named_parameters():
        if name in state_dict:
            param.copy_(state_dict[name])
    return model


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
pretrained = {name: torch.randn_like(p) * 0.02 for name, p in model.named_parameters()}
model = tie_or_load_weights(model, pretrained)
optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)
inputs, labels = torch.randn(8, 16), torch.randint(0, 4, (8,))
loss = nn.functional.cross_entropy(model(inputs), labels)
optimizer.zero_grad()
loss.backward()  # SYMPTOM
optimizer.step()
