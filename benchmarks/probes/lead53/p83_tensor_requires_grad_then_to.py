import numpy as np
import torch
import torch.nn as nn

device = torch.device("cpu")
net = nn.Linear(4, 1)
arr = np.random.rand(3, 4).astype(np.float64)
inp = torch.tensor(arr, requires_grad=True).float().to(device)  # ROOT
out = net(inp).sum()
out.backward()
saliency = inp.grad.abs()
