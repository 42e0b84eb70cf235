"""Fusing BatchNorm into a conv for testing: the fused kernel is written into cconv.weight[:,:,:,:].

source: https://github.com/PingoLH/FCHarDNet/issues/61
kind: bug
symptom: crash
verified: RuntimeError: a leaf Variable that requires grad is being used in an in-place operation.
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
conv = nn.Conv2d(3, 4, 3, bias=False)
bn = nn.BatchNorm2d(4).eval()
cconv = nn.Conv2d(3, 4, 3, bias=True)

scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
W = conv.weight * scale.view(-1, 1, 1, 1)
cconv.weight[:, :, :, :] = W[:, :, :, :]  # ROOT
cconv.bias.data = bn.bias - bn.running_mean * scale
