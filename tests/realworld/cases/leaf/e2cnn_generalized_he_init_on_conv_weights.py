"""e2cnn: generalized_he_init(conv.weights, ...) fills the Parameter in place outside torch.no_grad on PyTorch 1.8+.

source: https://github.com/QUVA-Lab/e2cnn/issues/34
kind: bug
symptom: crash
verified: a leaf Variable that requires grad is being used in an in-place operation
"""
import math
from collections import defaultdict
import torch
import torch.nn as nn
import torch.nn.functional as F


class BasisExpansion:
    def __init__(self, in_fields, basis_per_field):
        self.attributes = [{"in_field": f, "basis": b} for f in range(in_fields) for b in range(basis_per_field)]


class R2Conv(nn.Module):
    def __init__(self, in_fields, out_channels, basis_per_field=3, size=3):
        super().__init__()
        self.basisexpansion = BasisExpansion(in_fields, basis_per_field)
        self.weights = nn.Parameter(torch.zeros(len(self.basisexpansion.attributes)))
        self.register_buffer('sampled_basis', torch.randn(len(self.basisexpansion.attributes), out_channels, in_fields, size, size))

    def forward(self, x):
        kernel = torch.einsum("b,boihw->oihw", self.weights, self.sampled_basis)
        return F.conv2d(x, kernel, padding=1)


def generalized_he_init(tensor, basisexpansion):
    vars = torch.ones_like(tensor)
    inputs_count = defaultdict(lambda: set())
    for attr in basisexpansion.attributes:
        inputs_count[attr["basis"]].add(attr["in_field"])
    for i, attr in enumerate(basisexpansion.attributes):
        vars[i] = 1. / math.sqrt(len(inputs_count[attr["basis"]]))
    tensor[:] = vars * torch.randn_like(tensor)


torch.manual_seed(0)
convs = [R2Conv(2, 4), R2Conv(4, 4)]
for conv in convs:
    generalized_he_init(conv.weights, conv.basisexpansion)  # ROOT
model = nn.Sequential(*convs)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
loss = model(torch.randn(2, 2, 8, 8)).pow(2).mean()
loss.backward()
optimizer.step()
