"""GPT-SoVITS SynthesizerTrn with freeze_quantizer: the `with maybe_no_grad:` block only switches ssl_proj and the quantizer to eval, while the two calls that should be frozen sit after it, so both keep getting gradients and training.

source: https://github.com/RVC-Boss/GPT-SoVITS/issues/1921
kind: bug
symptom: silent
verified: with freeze_quantizer=True, ssl_proj.weight gets a gradient and changes after optimizer.step()
"""
import contextlib

import torch
import torch.nn as nn
import torch.nn.functional as F


class ResidualVectorQuantizer(nn.Module):
    def __init__(self, dimension=8, bins=16):
        super().__init__()
        self.codebook = nn.Parameter(torch.randn(bins, dimension))

    def forward(self, x, layers=(0,)):
        flat = x.transpose(1, 2)
        codes = torch.cdist(flat, self.codebook.expand(flat.shape[0], -1, -1)).argmin(-1)
        quantize = self.codebook[codes].transpose(1, 2)
        commit_loss = F.mse_loss(x, quantize.detach()) + F.mse_loss(quantize, x.detach())
        quantized = x + (quantize - x).detach()
        return quantized, codes, commit_loss, [quantized]


class SynthesizerTrn(nn.Module):
    def __init__(self, ssl_dim=12, hidden=8, freeze_quantizer=True):
        super().__init__()
        self.ssl_proj = nn.Conv1d(ssl_dim, hidden, 1, stride=1)
        self.quantizer = ResidualVectorQuantizer(dimension=hidden, bins=16)
        self.enc_p = nn.Conv1d(hidden, hidden, 3, padding=1)
        self.dec = nn.Conv1d(hidden, 1, 3, padding=1)
        self.freeze_quantizer = freeze_quantizer

    def forward(self, ssl, y):
        maybe_no_grad = torch.no_grad() if self.freeze_quantizer else contextlib.nullcontext()
        with maybe_no_grad:
            if self.freeze_quantizer:
                self.ssl_proj.eval()
                self.quantizer.eval()
        ssl = self.ssl_proj(ssl)  # ROOT
        quantized, codes, commit_loss, quantized_list = self.quantizer(ssl, layers=[0])
        y_hat = self.dec(torch.relu(self.enc_p(quantized)))
        return F.l1_loss(y_hat, y) + commit_loss


torch.manual_seed(0)
net_g = SynthesizerTrn(freeze_quantizer=True)
optim_g = torch.optim.AdamW(filter(lambda p: p.requires_grad, net_g.parameters()), lr=1e-4, betas=(0.8, 0.99))
proj_before = net_g.ssl_proj.weight.clone()
for batch_idx in range(3):
    ssl, y = torch.randn(2, 12, 20), torch.randn(2, 1, 20)
    loss_gen_all = net_g(ssl, y)
    optim_g.zero_grad()
    loss_gen_all.backward()
    optim_g.step()
