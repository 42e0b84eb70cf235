"""vector-quantize-pytorch's ResidualVQ feeds each quantizer residual = residual - quantized, where quantized is the straight-through output x + (quantize - x).detach() of the previous layer; its gradient with respect to the residual is the identity, so every later residual has zero gradient and the commitment losses of quantizers 2..n never reach the encoder output.

source: https://github.com/lucidrains/vector-quantize-pytorch/issues/33
kind: bug
symptom: silent
verified: the commitment losses of quantizers 2, 3 and 4 send a gradient of norm 0.0 to the input (quantizer 1: 0.0652); with residual = residual - quantized.detach() (the fix) they send 0.0652, 0.0576 and 0.0711
"""
from functools import partial

import torch
from torch import nn
import torch.nn.functional as F


class VectorQuantize(nn.Module):  # codebook lookup, straight-through estimator and commitment loss of the library
    def __init__(self, dim, codebook_size, commitment_weight=1.):
        super().__init__()
        self.register_buffer('embed', torch.randn(codebook_size, dim))  # EMA-updated codebook, no gradient
        self.commitment_weight = commitment_weight

    def forward(self, x):
        dist = torch.cdist(x, self.embed.unsqueeze(0).expand(x.shape[0], -1, -1))
        embed_ind = dist.argmin(dim=-1)
        quantize = F.embedding(embed_ind, self.embed)
        loss = torch.tensor([0.], device=x.device, requires_grad=self.training)
        if self.training:
            quantize = x + (quantize - x).detach()
            detached_quantize = quantize.detach()
            commit_loss = F.mse_loss(detached_quantize, x)
            loss = loss + commit_loss * self.commitment_weight
        return quantize, embed_ind, loss


class ResidualVQ(nn.Module):
    def __init__(self, *, num_quantizers, **kwargs):
        super().__init__()
        self.num_quantizers = num_quantizers
        self.layers = nn.ModuleList([VectorQuantize(**kwargs) for _ in range(num_quantizers)])

    def forward(self, x):
        quantized_out = 0.
        residual = x
        all_losses, all_indices = [], []
        for quantizer_index, layer in enumerate(self.layers):
            quantized, indices, loss = layer(residual)
            residual = residual - quantized  # ROOT
            quantized_out = quantized_out + quantized
            all_indices.append(indices)
            all_losses.append(loss)
        all_losses, all_indices = map(partial(torch.stack, dim=-1), (all_losses, all_indices))
        return quantized_out, all_indices, all_losses


torch.manual_seed(0)
quantizer = ResidualVQ(num_quantizers=4, dim=16, codebook_size=8)
for i in range(4):  # the check: backpropagate each quantizer's loss alone to the input
    input = torch.rand((2, 30, 16), requires_grad=True)
    quantized, indices, losses = quantizer(input)
    losses[0, i].backward()
    print("quantizer", i + 1, "commitment loss grad on input:", round(input.grad.norm().item(), 4))
