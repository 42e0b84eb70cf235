"""A model whose input embedding and output projection share one Parameter is loaded with load_state_dict(assign=True), which gives each name its own Parameter.

source: https://github.com/pytorch/pytorch/issues/188346
kind: bug
symptom: silent
verified: after the load dst.parameters() yields 2 tensors that share one storage (src's), so each Adam step moves the weight twice; after 3 steps (lr 0.1) embed.weight differs by 0.27 (max abs) from the same training after the default load, which keeps 1 shared parameter of its own
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
dst.load_state_dict(src.state_dict(), assign=True)  # ROOT
optimizer = torch.optim.Adam(dst.parameters(), lr=0.1)
for step in range(3):
    tokens = torch.randint(0, 6, (8,))
    loss = nn.functional.cross_entropy(dst(tokens), torch.roll(tokens, 1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(len(list(dst.parameters())), dst.embed.weight.data_ptr() == src.embed.weight.data_ptr())
