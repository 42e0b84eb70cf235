"""AOT's `LongShortTermTransformerBlock.forward` adds the long- and short-term attention outputs to its residual stream in place (`tgt += tgt2 + tgt3`) in the branch taken when long-short-term drop-path is off, which is the default (`TRAIN_LSTT_DROPPATH_LST = False`); `tgt` was just normalised by `self.norm2`, a `LayerNorm` that saved it for its backward, so the first training step's `loss.backward()` fails.

source: https://github.com/yoxu515/aot-benchmark/commit/538ea24d3ba78883494e6e50e6c8bec686e9afe2
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


def _get_norm(indim, type='ln', groups=8):
    if type == 'gn':
        return nn.GroupNorm(groups, indim)
    return nn.LayerNorm(indim)


def seq_to_2d(tensor, size_2d):
    h, w = size_2d
    _, n, c = tensor.size()
    return tensor.view(h, w, n, c).permute(2, 3, 0, 1).contiguous()


class DropPath(nn.Module):
    def __init__(self, drop_prob=None, batch_dim=0):
        super().__init__()
        self.drop_prob = drop_prob
        self.batch_dim = batch_dim

    def forward(self, x):
        if self.drop_prob == 0. or not self.training:
            return x
        keep_prob = 1 - self.drop_prob
        shape = [1 for _ in range(x.ndim)]
        shape[self.batch_dim] = x.shape[self.batch_dim]
        random_tensor = keep_prob + torch.rand(shape, dtype=x.dtype, device=x.device)
        return x.div(keep_prob) * random_tensor.floor_()


class LocalAttention2d(nn.Module):
    """Stand-in for `MultiheadLocalAttentionV3`: each position attends to its 3x3 neighbourhood."""

    def __init__(self, d_model):
        super().__init__()
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, q, k, v):
        n, c, h, w = q.shape
        k_unf = F.unfold(k, 3, padding=1).view(n, c, 9, h * w)
        v_unf = F.unfold(v, 3, padding=1).view(n, c, 9, h * w)
        att = torch.softmax((q.view(n, c, 1, h * w) * k_unf).sum(1, keepdim=True) / c ** 0.5, dim=2)
        out = (att * v_unf).sum(2).permute(2, 0, 1)  # (hw, n, c)
        return self.proj(out), att


class LongShortTermTransformerBlock(nn.Module):
    def __init__(self, d_model, self_nhead, att_nhead, dim_feedforward=64, droppath=0.1, droppath_lst=False):
        super().__init__()
        self.norm1 = _get_norm(d_model)
        self.self_attn = nn.MultiheadAttention(d_model, self_nhead)
        self.norm2 = _get_norm(d_model)
        self.linear_Q = nn.Linear(d_model, d_model)
        self.linear_V = nn.Linear(d_model, d_model)
        self.long_term_attn = nn.MultiheadAttention(d_model, att_nhead)
        self.short_term_attn = LocalAttention2d(d_model)
        self.droppath_lst = droppath_lst
        self.norm3 = _get_norm(d_model)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.droppath = DropPath(droppath, batch_dim=1)

    def forward(self, tgt, long_term_memory=None, short_term_memory=None, curr_id_emb=None, size_2d=(8, 8)):
        # Self-attention
        _tgt = self.norm1(tgt)
        tgt2 = self.self_attn(_tgt, _tgt, _tgt)[0]
        tgt = tgt + self.droppath(tgt2)

        # Long Short-Term Attention
        _tgt = self.norm2(tgt)
        curr_Q = self.linear_Q(_tgt)
        curr_K = curr_Q
        curr_V = _tgt
        local_Q = seq_to_2d(curr_Q, size_2d)
        if curr_id_emb is not None:
            global_K = curr_K
            global_V = self.linear_V(curr_V + curr_id_emb)
            local_K = seq_to_2d(global_K, size_2d)
            local_V = seq_to_2d(global_V, size_2d)
        else:
            global_K, global_V = long_term_memory
            local_K, local_V = short_term_memory

        tgt2 = self.long_term_attn(curr_Q, global_K, global_V)[0]
        tgt3 = self.short_term_attn(local_Q, local_K, local_V)[0]

        if self.droppath_lst:
            tgt = tgt + self.droppath(tgt2 + tgt3)
        else:
            tgt += tgt2 + tgt3  # ROOT

        # Feed-forward
        _tgt = self.norm3(tgt)
        tgt2 = self.linear2(F.gelu(self.linear1(_tgt)))
        tgt = tgt + self.droppath(tgt2)
        return tgt, [[curr_K, curr_V], [global_K, global_V], [local_K, local_V]]


class DefaultConfig:
    MODEL_ENCODER_DIM = 32
    MODEL_SELF_HEADS = 4
    MODEL_ATT_HEADS = 4
    TRAIN_LSTT_DROPPATH = 0.1
    TRAIN_LSTT_DROPPATH_LST = False


cfg = DefaultConfig()
block = LongShortTermTransformerBlock(cfg.MODEL_ENCODER_DIM, cfg.MODEL_SELF_HEADS, cfg.MODEL_ATT_HEADS,
                                      droppath=cfg.TRAIN_LSTT_DROPPATH, droppath_lst=cfg.TRAIN_LSTT_DROPPATH_LST)
decoder = nn.Linear(cfg.MODEL_ENCODER_DIM, 3)
id_emb = nn.Embedding(3, cfg.MODEL_ENCODER_DIM)
optimizer = torch.optim.AdamW([*block.parameters(), *decoder.parameters(), *id_emb.parameters()], lr=1e-3)

h = w = 8
frames = torch.randn(4, h * w, 2, cfg.MODEL_ENCODER_DIM)  # (steps, hw, batch, c)
masks = torch.randint(0, 3, (4, 2, h * w))
for step in range(4):
    curr_id_emb = id_emb(masks[step]).permute(1, 0, 2)  # reference-frame identity embedding
    out, memories = block(frames[step], curr_id_emb=curr_id_emb, size_2d=(h, w))
    loss = F.cross_entropy(decoder(out).permute(1, 2, 0), masks[step])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"loss after 4 steps: {loss.item():.3f}")
