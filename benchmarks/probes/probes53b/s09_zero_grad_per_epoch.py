import torch
import torch.nn as nn

net = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1))
opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
loader = [(torch.randn(16, 2), torch.randn(16, 1)) for _ in range(4)]

for epoch in range(2):
    net.train()
    opt.zero_grad()  # ROOT
    for xb, yb in loader:
        loss = nn.functional.mse_loss(net(xb), yb)
        loss.backward()
        opt.step()
    print(epoch, loss.item())
