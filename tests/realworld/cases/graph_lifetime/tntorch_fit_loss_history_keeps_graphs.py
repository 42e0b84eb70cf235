"""tntorch's fitting loop appends the loss tensor itself to loss_history, so every iteration's graph stays referenced.

source: https://github.com/rballester/tntorch/pull/19
kind: bug
symptom: silent
verified: after 200 iterations all 200 loss_history entries still hold a grad_fn, so 200 graphs stay referenced; appending loss.item() keeps none
"""
import torch


def optimize(tensors, loss_function, optimizer=torch.optim.Adam, lr=1e-2, max_iter=200):
    optimizer = optimizer(tensors, lr=lr)
    loss_history = []
    for i in range(max_iter):
        optimizer.zero_grad()
        loss = loss_function()
        loss.backward()
        optimizer.step()
        loss_history.append(loss)  # ROOT
    return loss_history


torch.manual_seed(0)
picture = torch.rand(20, 20)
cores = [torch.randn(1, 20, 4, requires_grad=True), torch.randn(4, 20, 1, requires_grad=True)]


def loss_function():
    full = torch.einsum('aib,bjc->ij', cores[0], cores[1])
    return ((full - picture) ** 2).mean()


history = optimize(cores, loss_function)
print(len(history), sum(h.grad_fn is not None for h in history))
