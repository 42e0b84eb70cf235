"""Knowledge editing: the in-place column edit of a dense weight done under torch.no_grad().

source: https://github.com/Hunter-DDM/knowledge-neurons/issues/14
kind: lookalike
verified: the column changes and the layer still trains afterwards
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
dense = nn.Linear(16, 8)
pos = 3
ori_pred_emb, tgt_emb = torch.randn(8), torch.randn(8)
with torch.no_grad():
    dense.weight[:, pos] -= ori_pred_emb * 0.5
    dense.weight[:, pos] += tgt_emb * 0.5

opt = torch.optim.SGD(dense.parameters(), lr=0.1)
loss = dense(torch.randn(4, 16)).pow(2).mean()
loss.backward()
opt.step()
print(dense.weight.grad.abs().sum().item() > 0)
