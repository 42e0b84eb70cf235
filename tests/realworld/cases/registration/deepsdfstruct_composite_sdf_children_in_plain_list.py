"""DeepSDFStruct composite SDFs: DifferenceSDF keeps its first operand as an attribute (base_obj) but stores the subtracted children in a plain Python list, so their learnable center and radius are not registered; the optimizer over d.parameters() only fits the base circle.

source: https://github.com/mkofler96/DeepSDFStruct/issues/78
kind: bug
symptom: silent
verified: d.parameters() lists only base_obj.center and base_obj.radius; the subtracted circle's radius never changes during fitting
"""
import torch
import torch.nn as nn


class SDFBase(nn.Module):
    def forward(self, queries):
        return self._compute(queries)


class CircleSDF(SDFBase):
    def __init__(self, center, radius):
        super().__init__()
        self.center = nn.Parameter(torch.tensor(center))
        self.radius = nn.Parameter(torch.tensor(radius))

    def _compute(self, queries):
        return torch.linalg.norm(queries - self.center, dim=-1) - self.radius


class DifferenceSDF(SDFBase):
    def __init__(self, base_obj, *subtract):
        super().__init__()
        self.base_obj = base_obj
        self.children_sdfs = list(subtract)  # ROOT

    def _compute(self, queries):
        d = self.base_obj(queries)
        for child in self.children_sdfs:
            d = torch.maximum(d, -child(queries))
        return d


torch.manual_seed(0)
base = CircleSDF(center=(0.0, 0.0), radius=1.0)
sub = CircleSDF(center=(0.3, 0.0), radius=0.4)
d = DifferenceSDF(base, sub)
print([name for name, _ in d.named_parameters()])
target = DifferenceSDF(CircleSDF((0.0, 0.0), 1.2), CircleSDF((0.3, 0.0), 0.6))
queries = torch.rand(256, 2) * 3 - 1.5
with torch.no_grad():
    target_sdf = target(queries)
optimizer = torch.optim.Adam(d.parameters(), lr=1e-2)
sub_radius_before = sub.radius.detach().clone()
for it in range(50):
    loss = (d(queries) - target_sdf).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(base.radius.item(), torch.equal(sub.radius.detach(), sub_radius_before))
