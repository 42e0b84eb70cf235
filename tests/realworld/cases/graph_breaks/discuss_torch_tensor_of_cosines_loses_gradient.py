"""The forum report's angles a and b require grad, cosa = torch.cos(a) and cosb = torch.cos(b) carry their graph, but the vector is built with torch.tensor([cosa, cosb]): torch.tensor copies the values into a new tensor without history, so the matmul with `mat` and the loss have no grad_fn and backward() fails on the first step of the fit.

source: https://discuss.pytorch.org/t/gradient-is-lost-when-use-torch-tensor-t1-t2/23261
kind: bug
symptom: crash
verified: element 0 of tensors does not require grad and does not have a grad_fn
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
    y2 = torch.tensor([  # ROOT
        cosa, cosb
    ])
    y2 = torch.matmul(y2, mat)
    loss = (y2 - target).pow(2).sum()
    optimizer.zero_grad()
    loss.backward()  # SYMPTOM
    optimizer.step()
print("a", a.item(), "b", b.item(), "loss", loss.item())
