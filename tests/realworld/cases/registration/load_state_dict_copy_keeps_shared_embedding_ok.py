"""A model whose input embedding and output projection share one Parameter is loaded with the default load_state_dict, which copies into the shared tensor in place.

source: https://github.com/pytorch/pytorch/issues/188346
kind: lookalike
"""
import torch
import torch.nn as nn


class Sub(nn.Module):
    def __init__(self, weight):
        super().__init__()
        self.weight = weight


class Model(nn.Module):
    def __init__(self, vocab=6, dim=4):
        super().__init__()
        w = nn.Parameter(torch.randn(vocab, dim))
        self.embed = Sub(w)
        self.proj = Sub(w)

    def forward(self, tokens):
        h = torch.tanh(self.embed.weight[tokens])
        return h @ self.proj.weight.t()


torch.manual_seed(0)
src, dst = Model(), Model()
dst.load_state_dict(src.state_dict())
optimizer = torch.optim.Adam(dst.parameters(), lr=0.1)
for step in range(3):
    tokens = torch.randint(0, 6, (8,))
    loss = nn.functional.cross_entropy(dst(tokens), torch.roll(tokens, 1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(len(list(dst.parameters())), dst.embed.weight.data_ptr() == src.embed.weight.data_ptr())
