"""In-place update through an index of a tensor that requires grad (c[:] += 1), which the reporter saw pass silently and turn c into a non-leaf; on current PyTorch the write into a view of a leaf is refused.

source: https://discuss.pytorch.org/t/inplace-operation-changes-is-leaf-attribute/120297
kind: bug
symptom: crash
verified: a view of a leaf Variable that requires grad is being used in an in-place operation
"""
import torch

c = torch.randn(10, 3, 2, 32, requires_grad=True)
print(c.is_leaf)
# operation 5
d = c.detach()
d += 1  # no error, and still leaf
print(c.is_leaf)
# operation 6
c[:] += 1  # ROOT
print(c.is_leaf)
loss = (c ** 2).sum()
loss.backward()
