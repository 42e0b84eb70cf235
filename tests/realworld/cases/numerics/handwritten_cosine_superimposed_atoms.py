"""Angular terms with a handwritten cosine: two superimposed atoms make a zero norm and NaN gradients.

source: https://github.com/aiqm/torchani/pull/561
kind: bug
symptom: silent
verified: coordinates.grad contains NaN
"""
import torch


def angular_terms(vectors12):
    v1, v2 = vectors12
    cos_angles = (v1 * v2).sum(-1) / (v1.norm(2, dim=-1) * v2.norm(2, dim=-1))  # ROOT
    return 0.95 * cos_angles


coordinates = torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
                           requires_grad=True)
center, a, b = coordinates[0], coordinates[1], coordinates[2]
vectors12 = torch.stack([a - center, b - center]).unsqueeze(1)
energy = angular_terms(vectors12).sum()
energy.backward()
print(coordinates.grad)
