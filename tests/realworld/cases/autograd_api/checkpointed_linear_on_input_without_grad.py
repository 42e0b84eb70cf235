"""torch.utils.checkpoint (reentrant) around a Linear whose only input is plain data: the checkpoint's output does not require grad even though m has trainable weights, so the loss has no graph and backward fails.

source: https://github.com/pytorch/pytorch/issues/7617
kind: bug
symptom: crash
verified: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)
m = torch.nn.Linear(4, 3)
optimizer = torch.optim.SGD(m.parameters(), lr=0.1)
x = torch.randn(10, 4)
y = torch.randn(10, 3)

z1 = checkpoint(lambda _: m(_), x, use_reentrant=True)  # ROOT
print(z1.requires_grad)
z2 = m(x)
print(z2.requires_grad)

loss = ((z1 - y) ** 2).mean()
optimizer.zero_grad()
loss.backward()  # SYMPTOM
optimizer.step()
