"""Mesh edge-length loss: sqrt of a squared length that is zero on a collapsed edge gives NaN.

source: https://github.com/akanazawa/cmr/issues/11
kind: bug
symptom: silent
verified: verts.grad contains NaN after backward
"""
import torch


class EdgeLoss:
    def __init__(self, edges2verts):
        edge_verts = edges2verts[:, :, :2]
        self.indices = torch.stack([edge_verts, edge_verts, edge_verts], dim=2)

    def compute_edgelength(self, V):
        v1 = torch.gather(V, 1, self.indices[:, :, :, 0])
        v2 = torch.gather(V, 1, self.indices[:, :, :, 1])
        return torch.sqrt(((v1 - v2) ** 2).sum(2))  # ROOT

    def __call__(self, verts):
        return self.compute_edgelength(verts).mean()


verts = torch.tensor([[[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]], requires_grad=True)
edges2verts = torch.tensor([[[0, 1, 2, 0], [1, 2, 0, 1]]])
loss = EdgeLoss(edges2verts)(verts)
loss.backward()
print(torch.isnan(verts.grad).any().item())
