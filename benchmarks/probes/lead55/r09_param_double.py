"""A learnable temperature wrapped in nn.Parameter and then cast to float64: the cast result is a plain tensor."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ContrastiveHead(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.proj = nn.Linear(dim, dim).double()
        self.log_temp = nn.Parameter(torch.zeros(())).double()  # ROOT

    def forward(self, a, b):
        za = F.normalize(self.proj(a), dim=1)
        zb = F.normalize(self.proj(b), dim=1)
        return za @ zb.t() * self.log_temp.exp()


if __name__ == "__main__":
    torch.manual_seed(0)
    head = ContrastiveHead()
    opt = torch.optim.SGD(head.parameters(), lr=0.5)
    for _ in range(10):
        a = torch.randn(8, 16, dtype=torch.float64)
        logits = head(a, a + 0.1 * torch.randn_like(a))
        loss = F.cross_entropy(logits, torch.arange(8))
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("temperature", head.log_temp.item(), "registered:", any(p is head.log_temp for p in head.parameters()))
