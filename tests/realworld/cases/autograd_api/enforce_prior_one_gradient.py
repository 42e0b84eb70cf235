"""Segmentation autoencoder: a custom EnforcePrior Function returns one gradient for its two inputs.

source: https://github.com/evanmy/sae/issues/5
kind: bug
symptom: crash
verified: RuntimeError: function EnforcePriorBackward returned an incorrect number of gradients (expected 2, got 1)
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class EnforcePrior(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, prior):
        ctx.save_for_backward(prior)
        return logits + torch.log(prior + 1e-6)

    @staticmethod
    def backward(ctx, grad_output):
        (prior,) = ctx.saved_tensors
        return grad_output  # ROOT


encoder = nn.Conv2d(1, 4, 3, padding=1)
optimizer = torch.optim.Adam(encoder.parameters(), lr=1e-3)
image = torch.randn(2, 1, 8, 8)
prior = torch.softmax(torch.randn(2, 4, 8, 8), dim=1)
seg = torch.softmax(EnforcePrior.apply(encoder(image), prior), dim=1)
recon = (seg * torch.randn(1, 4, 1, 1)).sum(1, keepdim=True)
loss = (recon - image).pow(2).mean()
loss.backward()  # SYMPTOM
optimizer.step()
