import torch
import torch.nn as nn
from utils import predict

net = nn.Linear(5, 2)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(3):
    x, y = torch.randn(4, 5), torch.randn(4, 2)
    out = predict(net, x)
    loss = ((out - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
