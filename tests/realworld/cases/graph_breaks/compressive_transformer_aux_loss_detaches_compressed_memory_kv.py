"""compressive-transformer-pytorch's SelfAttention computes the compressed-memory reconstruction loss after q, old_mem_k, old_mem_v, cmem_k, cmem_v = map(torch.detach, ...): the compressed keys/values are detached too, so aux_loss reaches no weight at all and the memory compression network (compress_mem_fn) is never trained.

source: https://github.com/lucidrains/compressive-transformer-pytorch/issues/5
kind: bug
symptom: silent
verified: after aux_loss.backward() compress_mem_fn's conv weight .grad is None and 0 of 6 parameters get a gradient (aux_loss 0.1535); with cmem_k, cmem_v left attached (the fix) the conv weight gets 0.3884 and 3 of 6 parameters get a gradient
"""
from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F


def split_at_index(dim, index, t):
    pre_slices = (slice(None),) * dim
    return t[(*pre_slices, slice(None, index))], t[(*pre_slices, slice(index, None))]


def queue_fifo(*args, length, dim=-2):
    return split_at_index(dim, -length, torch.cat(args, dim=dim))


def full_attn(q, k, v, dropout_fn=None):
    dots = torch.einsum('bhid,bhjd->bhij', q, k) * q.shape[-1] ** -0.5
    return torch.einsum('bhij,bhjd->bhid', dots.softmax(dim=-1), v)


class ConvCompress(nn.Module):
    def __init__(self, dim, ratio=4):
        super().__init__()
        self.conv = nn.Conv1d(dim, dim, ratio, stride=ratio)

    def forward(self, mem):
        return self.conv(mem.transpose(1, 2)).transpose(1, 2)


class SelfAttention(nn.Module):
    def __init__(self, dim, seq_len, mem_len, cmem_len, cmem_ratio=2, heads=2):
        super().__init__()
        self.heads, self.seq_len, self.mem_len, self.cmem_len = heads, seq_len, mem_len, cmem_len
        self.compress_mem_fn = ConvCompress(dim, cmem_ratio)
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_kv = nn.Linear(dim, dim * 2, bias=False)
        self.to_out = nn.Linear(dim, dim)
        self.reconstruction_attn_dropout = nn.Dropout(0.)

    def forward(self, x, memories):
        b, t, e, h = *x.shape, self.heads
        mem, cmem = memories
        mem_len = mem.shape[1]
        merge_heads = lambda z: z.reshape(b, -1, h, e // h).transpose(1, 2)
        q = merge_heads(self.to_q(x))
        k, v = map(merge_heads, self.to_kv(torch.cat((cmem, mem, x), dim=1)).chunk(2, dim=-1))
        out = full_attn(q, k, v).transpose(1, 2).reshape(b, t, e)
        logits = self.to_out(out)

        old_mem, new_mem = queue_fifo(mem, x, length=self.mem_len, dim=1)
        compressed_mem = self.compress_mem_fn(old_mem)
        old_cmem, new_cmem = split_at_index(1, -self.cmem_len, torch.cat((cmem, compressed_mem), dim=1))

        cmem_k, cmem_v = map(merge_heads, self.to_kv(compressed_mem).chunk(2, dim=-1))
        old_mem_range = slice(- min(mem_len, self.mem_len) - self.seq_len, -self.seq_len)
        old_mem_k, old_mem_v = map(lambda z: z[:, :, old_mem_range].clone(), (k, v))
        q, old_mem_k, old_mem_v, cmem_k, cmem_v = map(torch.detach, (q, old_mem_k, old_mem_v, cmem_k, cmem_v))  # ROOT
        attn_fn = partial(full_attn, dropout_fn=self.reconstruction_attn_dropout)
        aux_loss = F.mse_loss(attn_fn(q, old_mem_k, old_mem_v), attn_fn(q, cmem_k, cmem_v))
        return logits, (new_mem, new_cmem), aux_loss


torch.manual_seed(0)
attn = SelfAttention(dim=8, seq_len=4, mem_len=4, cmem_len=2)
x, mem, cmem = torch.randn(2, 4, 8), torch.randn(2, 4, 8), torch.randn(2, 2, 8)
logits, _, layer_aux_loss = attn(x, (mem, cmem))
aux_loss = torch.tensor(0., requires_grad=True)  # CompressiveTransformer.forward accumulates the layers' aux losses
aux_loss = aux_loss + layer_aux_loss
attn.zero_grad(set_to_none=True)
aux_loss.backward()
print("aux_loss", round(aux_loss.item(), 4))
grad = attn.compress_mem_fn.conv.weight.grad
print("compress_mem_fn conv weight grad:", None if grad is None else round(grad.norm().item(), 4))
print(sum(p.grad is not None for p in attn.parameters()), "of", len(list(attn.parameters())), "parameters get a gradient")
