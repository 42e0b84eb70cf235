"""Silent: `.double()` after requires_grad=True makes a non-leaf; its .grad stays None."""
import torch

w = torch.randn(3, requires_grad=True).double()  # <- cause
x = torch.randn(10, 3, dtype=torch.float64)
loss = (x @ w).pow(2).mean()
loss.backward()
print("grad:", w.grad)
