"""Per-sample gradient hooks are run by calling backward() on the model's whole output vector instead of on one scalar.

source: https://github.com/cybertronai/autograd-hacks/issues/8
kind: bug
symptom: crash
verified: RuntimeError: grad can be implicitly created only for scalar outputs
"""
import torch
import torch.nn as nn

activations = {}


def add_hooks(model):
    for layer in model.modules():
        if isinstance(layer, nn.Linear):
            layer.register_forward_hook(lambda m, inp, out: activations.__setitem__(m, inp[0].detach()))
            layer.register_full_backward_hook(lambda m, gin, gout: activations.__setitem__((m, "backprops"), gout[0]))


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3))
add_hooks(model)
data = torch.randn(8, 10)
output = model(data)
output.backward()  # ROOT
layer = model[2]
grad1 = torch.einsum('ni,nj->nij', activations[(layer, "backprops")], activations[layer])
