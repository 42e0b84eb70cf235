"""The forum report's vector of cosines built with torch.cat of the two unsqueezed cosines: concatenation is differentiable, so the matmul with the constant matrix mat (itself built with torch.tensor from plain numbers, which is fine) keeps the graph back to the angles.

source: https://discuss.pytorch.org/t/gradient-is-lost-when-use-torch-tensor-t1-t2/23261
kind: lookalike
"""
import torch

a = torch.tensor(0.5)
b = torch.tensor(1.0)
a.requires_grad = True
b.requires_grad = True
mat = torch.tensor([
    [1.0, 2.0],
    [3.0, 4.0]
])
target = torch.tensor([2.5, 4.0])
optimizer = torch.optim.SGD([a, b], lr=0.01)
for step in range(50):
    cosa = torch.cos(a)
    cosb = torch.cos(b)
    y1 = cosa + cosb
    y2 = torch.cat([cosa.unsqueeze(0), cosb.unsqueeze(0)])
    y2 = torch.matmul(y2, mat)
    loss = (y2 - target).pow(2).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("a", a.item(), "b", b.item(), "loss", loss.item())
