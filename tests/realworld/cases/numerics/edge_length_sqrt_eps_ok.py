"""Mesh edge-length loss with an epsilon inside the sqrt: a collapsed edge keeps finite gradients.

source: https://github.com/akanazawa/cmr/issues/11
kind: lookalike
verified: verts.grad is finite and the vertices move after a step
"""
import torch


class EdgeLoss:
    def __init__(self, edges2verts, eps=1e-8):
        edge_verts = edges2verts[:, :, :2]
        self.indices = torch.stack([edge_verts, edge_verts, edge_verts], dim=2)
        self.eps = eps

    def compute_edgelength(self, V):
        v1 = torch.gather(V, 1, self.indices[:, :, :, 0])
        v2 = torch.gather(V, 1, self.indices[:, :, :, 1])
        return torch.sqrt(((v1 - v2) ** 2).sum(2) + self.eps)

    def __call__(self, verts):
        return self.compute_edgelength(verts).mean()


verts = torch.tensor([[[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]], requires_grad=True)
opt = torch.optim.SGD([verts], lr=0.1)
edges2verts = torch.tensor([[[0, 1, 2, 0], [1, 2, 0, 1]]])
loss = EdgeLoss(edges2verts)(verts)
loss.backward()
opt.step()
print(torch.isfinite(verts.grad).all().item())
