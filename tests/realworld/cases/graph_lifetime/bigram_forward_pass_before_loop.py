"""Bigram model: the forward pass runs once before the gradient-descent loop, backward runs every step.

source: https://github.com/karpathy/nn-zero-to-hero/issues/31
kind: bug
symptom: crash
verified: Trying to backward through the graph a second time
"""
import torch
import torch.nn.functional as F

g = torch.Generator().manual_seed(2147483647)
xs = torch.tensor([0, 5, 13, 13, 1])
ys = torch.tensor([5, 13, 13, 1, 0])
W = torch.randn((27, 27), generator=g, requires_grad=True)

# forward pass
xenc = F.one_hot(xs, num_classes=27).float()
logits = xenc @ W
counts = logits.exp()
prob = counts / counts.sum(1, keepdims=True)
loss = -prob[torch.arange(5), ys].log().mean()  # ROOT

for k in range(10):
    print(loss.item())
    # backward pass
    W.grad = None
    loss.backward()  # SYMPTOM
    # update
    W.data += -0.1 * W.grad
