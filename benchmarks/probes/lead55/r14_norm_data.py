"""A hand-written layer norm reads .data of its input, so nothing before it gets a gradient."""
import torch
import torch.nn as nn


class SimpleLayerNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(d))
        self.beta = nn.Parameter(torch.zeros(d))
        self.eps = eps

    def forward(self, x):
        x = x.data  # ROOT
        mu = x.mean(-1, keepdim=True)
        var = x.var(-1, keepdim=True, unbiased=False)
        return self.gamma * (x - mu) / torch.sqrt(var + self.eps) + self.beta


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(10, 16)
        self.norm = SimpleLayerNorm(16)
        self.out = nn.Linear(16, 1)

    def forward(self, x):
        return self.out(self.norm(torch.relu(self.inp(x))))


if __name__ == "__main__":
    torch.manual_seed(0)
    enc = Encoder()
    opt = torch.optim.SGD(enc.parameters(), lr=0.1)
    w0 = enc.inp.weight.detach().clone()
    for _ in range(5):
        x, y = torch.randn(16, 10), torch.randn(16, 1)
        loss = ((enc(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("input layer moved:", not torch.equal(w0, enc.inp.weight))
