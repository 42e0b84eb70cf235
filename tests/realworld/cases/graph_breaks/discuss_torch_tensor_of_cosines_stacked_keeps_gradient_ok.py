"""The forum report's vector of cosines built with torch.stack([cosa, cosb]) (the answer in the thread): stack is differentiable, so the matmul with mat and the loss keep the graph back to the angles a and b and the fit runs.

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
    y2 = torch.stack([
        cosa, cosb
    ])
    y2 = torch.matmul(y2, mat)
    loss = (y2 - target).pow(2).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("a", a.item(), "b", b.item(), "loss", loss.item())
