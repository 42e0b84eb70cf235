"""MemAE's memory items are updated by backpropagation because the memory is an nn.Parameter.

source: https://github.com/donggong1/memae-anomaly-detection/issues/17
kind: lookalike
"""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class MemoryUnit(nn.Module):
    def __init__(self, mem_dim, fea_dim):
        super(MemoryUnit, self).__init__()
        self.mem_dim = mem_dim
        self.fea_dim = fea_dim
        self.weight = nn.Parameter(torch.Tensor(self.mem_dim, self.fea_dim))
        stdv = 1. / math.sqrt(self.weight.size(1))
        self.weight.data.uniform_(-stdv, stdv)

    def forward(self, input):
        att_weight = F.softmax(F.linear(input, self.weight), dim=1)
        output = F.linear(att_weight, self.weight.permute(1, 0))
        return {'output': output, 'att': att_weight}


torch.manual_seed(0)
encoder = nn.Linear(12, 8)
mem = MemoryUnit(mem_dim=10, fea_dim=8)
decoder = nn.Linear(8, 12)
params = list(encoder.parameters()) + list(mem.parameters()) + list(decoder.parameters())
optimizer = torch.optim.Adam(params, lr=1e-2)
x = torch.randn(32, 12)
for _ in range(10):
    optimizer.zero_grad()
    res = mem(encoder(x))
    loss = F.mse_loss(decoder(res['output']), x)
    loss.backward()
    optimizer.step()
