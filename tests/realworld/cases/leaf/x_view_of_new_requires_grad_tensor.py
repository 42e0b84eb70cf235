"""`X_view = torch.tensor([0.25, 0.75], requires_grad=True).view(2, 1, 1)`: the name holds the view, not the leaf created on the same line, so X_view.grad is None after backward while the same values built directly in the (2, 1, 1) shape get a gradient.

source: https://github.com/pytorch/pytorch/issues/19778
kind: bug
symptom: silent
verified: X.grad is [[[1.]], [[1.]]] but X_view.grad is None (torch warns about reading .grad of a non-leaf)
"""
import torch

X = torch.tensor([[[0.25]], [[0.75]]], requires_grad=True)
print(f"X.shape: {X.shape}")
X.sum().backward()
print(f"X.grad: {X.grad}")

X_view = torch.tensor([0.25, 0.75], requires_grad=True).view(2, 1, 1)  # ROOT
print(f"X_view.shape: {X_view.shape}")
X_view.sum().backward()
print(f"X_view.grad: {X_view.grad}")
print(f"X_view.grad is None: {X_view.grad is None}")
