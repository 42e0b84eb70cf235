import copy
import torch
import torch.nn as nn
import torch.nn.functional as F
from keyqueue import KeyQueue
from losses import info_nce

enc_q = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 8))
enc_k = copy.deepcopy(enc_q)
opt = torch.optim.SGD(enc_q.parameters(), lr=0.05)
queue = KeyQueue(8, 32)
for step in range(3):
    x = torch.randn(8, 10)
    q = F.normalize(enc_q(x + 0.1 * torch.randn_like(x)), dim=1)
    k = F.normalize(enc_k(x + 0.1 * torch.randn_like(x)), dim=1)  # ROOT
    loss = info_nce(q, k, queue)
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        for pk, pq in zip(enc_k.parameters(), enc_q.parameters()):
            pk.mul_(0.99).add_(pq, alpha=0.01)
    queue.enqueue(k)
