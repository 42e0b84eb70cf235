"""ParlAI's BasicAttention masks the padded keys with l1.masked_fill(attn_mask, neginf(l1.dtype)) and throws the result away: the out-of-place masked_fill returns a new tensor and leaves l1 unchanged, so the Poly-encoder's code attention puts weight on the padding positions of the context and the loss sends gradient into the encoder outputs at those positions.

source: https://github.com/facebookresearch/ParlAI/pull/3068
kind: bug
symptom: silent
verified: the code attention gives the padded context positions 0.364 of its weight and the encoder outputs at the padded positions receive a gradient of norm 0.1706; with l1.masked_fill_(attn_mask, ...) (the fix) both are 0.0
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


def neginf(dtype):
    return -1e20 if dtype is torch.float32 else -65504


class BasicAttention(nn.Module):
    def __init__(self, dim=1, attn='cosine', residual=False, get_weights=True):
        super().__init__()
        self.attn, self.dim, self.get_weights, self.residual = attn, dim, get_weights, residual

    def forward(self, xs, ys, mask_ys=None, values=None):
        bsz = xs.size(0)
        y_len = ys.size(1)
        x_len = xs.size(1)
        l1 = torch.bmm(xs, ys.transpose(1, 2))
        if self.attn == 'sqrt':
            l1 = l1 / math.sqrt(ys.size(-1))
        if mask_ys is not None:
            attn_mask = (mask_ys == 0).view(bsz, 1, y_len)
            attn_mask = attn_mask.repeat(1, x_len, 1)
            l1.masked_fill(attn_mask, neginf(l1.dtype))  # ROOT
        l2 = F.softmax(l1, dim=self.dim, dtype=torch.float).type_as(l1)
        self.last_weights = l2  # measurement only
        if values is None:
            values = ys
        lhs_emb = torch.bmm(l2, values)
        if self.get_weights:
            return lhs_emb.squeeze(self.dim - 1), l2
        return lhs_emb


class PolyEncoderModule(nn.Module):  # polyencoder_type 'codes', codes_attention_type 'basic'; encoders reduced to embeddings
    def __init__(self, vocab=40, embed_dim=16, n_codes=4):
        super().__init__()
        self.embeddings = nn.Embedding(vocab, embed_dim, padding_idx=0)
        self.ctxt_proj = nn.Linear(embed_dim, embed_dim)
        self.codes = nn.Parameter(nn.init.uniform_(torch.empty(n_codes, embed_dim)))
        self.code_attention = BasicAttention(dim=2, attn='basic', get_weights=False)
        self.attention = BasicAttention(dim=2, attn='basic', get_weights=False)

    def encoder_ctxt(self, input):
        mask = input != 0
        return torch.tanh(self.ctxt_proj(self.embeddings(input))), mask

    def forward(self, ctxt_tokens, cand_tokens):
        bsz = ctxt_tokens.size(0)
        cand_embed = self.embeddings(cand_tokens).mean(1).unsqueeze(0).expand(bsz, -1, -1)
        ctxt_out, ctxt_mask = self.encoder_ctxt(ctxt_tokens)
        ctxt_out.retain_grad()
        self.ctxt_out, self.ctxt_mask = ctxt_out, ctxt_mask  # measurement only
        ctxt_rep = self.code_attention(self.codes.repeat(bsz, 1, 1), ctxt_out, mask_ys=ctxt_mask, values=ctxt_out)
        ctxt_rep_mask = ctxt_rep.new_ones(bsz, self.codes.size(0)).byte()
        ctxt_final_rep = self.attention(cand_embed, ctxt_rep, mask_ys=ctxt_rep_mask, values=ctxt_rep)
        return torch.sum(ctxt_final_rep * cand_embed, 2)


torch.manual_seed(0)
model = PolyEncoderModule()
ctxt_tokens = torch.randint(1, 40, (6, 10))
ctxt_tokens[:, 5:] = 0  # the contexts are padded to 10 tokens
cand_tokens = torch.randint(1, 40, (6, 3))
scores = model(ctxt_tokens, cand_tokens)
loss = F.cross_entropy(scores, torch.arange(6))  # in-batch candidates
loss.backward()
pad = ~model.ctxt_mask
print("code attention weight on padding", round(model.code_attention.last_weights[..., 5:].sum(-1).mean().item(), 4))
print("gradient at padded encoder outputs", round(model.ctxt_out.grad[pad].norm().item(), 4))
