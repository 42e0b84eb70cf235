import torch

torch.manual_seed(0)
params = {"w": torch.randn(3, 1, requires_grad=True), "b": torch.zeros(1, requires_grad=True)}
X = torch.randn(32, 3)
Y = X @ torch.tensor([[1.0], [-2.0], [0.5]]) + 0.3
lr = 0.1
for epoch in range(3):
    pred = X @ params["w"] + params["b"]
    loss = ((pred - Y) ** 2).mean()
    loss.backward()
    for k in params:
        params[k] = params[k] - lr * params[k].grad  # ROOT
    print(epoch, loss.item())
