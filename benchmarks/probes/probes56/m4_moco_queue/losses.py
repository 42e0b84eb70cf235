import torch
import torch.nn.functional as F


def info_nce(q, k, queue, t=0.1):
    pos = (q * k).sum(1, keepdim=True)
    neg = q @ queue.keys.t()
    logits = torch.cat([pos, neg], 1) / t
    return F.cross_entropy(logits, torch.zeros(q.size(0), dtype=torch.long))
