"""The GPT-J 8-bit DequantizeAndLinear with the fix from the thread: forward returns F.linear(...).clone(), so the custom Function's output is not a view and the adapter's in-place addition is allowed.

source: https://github.com/gustavecortal/gpt-j-fine-tuning-example/issues/1
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def dequantize_blockwise(weights_quantized, absmax, code):
    """Cut-down bitsandbytes dequantize: code lookup scaled by the per-row absmax."""
    return code[weights_quantized.long()] * absmax[:, None]


class DequantizeAndLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weights_quantized, absmax, code, bias):
        weights_deq = dequantize_blockwise(weights_quantized, absmax=absmax, code=code)
        ctx.save_for_backward(input, weights_quantized, absmax, code)
        ctx._has_bias = bias is not None
        return F.linear(input, weights_deq, bias).clone()

    @staticmethod
    def backward(ctx, grad_output):
        input, weights_quantized, absmax, code = ctx.saved_tensors
        weights_deq = dequantize_blockwise(weights_quantized, absmax=absmax, code=code)
        grad_input = grad_output @ weights_deq
        grad_bias = grad_output.flatten(0, -2).sum(dim=0) if ctx._has_bias else None
        return grad_input, None, None, None, grad_bias


class FrozenBNBLinear(nn.Module):
    def __init__(self, weight, absmax, code, bias=None):
        super().__init__()
        self.out_features, self.in_features = weight.shape
        self.register_buffer("weight", weight.requires_grad_(False))
        self.register_buffer("absmax", absmax.requires_grad_(False))
        self.register_buffer("code", code.requires_grad_(False))
        self.adapter = None
        self.bias = bias

    def forward(self, input):
        output = DequantizeAndLinear.apply(input, self.weight, self.absmax, self.code, self.bias)
        if self.adapter:
            output += self.adapter(input)
        return output


def add_adapters(layer, adapter_dim=4):
    layer.adapter = nn.Sequential(nn.Linear(layer.in_features, adapter_dim, bias=False),
                                  nn.Linear(adapter_dim, layer.out_features, bias=False))
    nn.init.zeros_(layer.adapter[1].weight)


torch.manual_seed(0)
code = torch.linspace(-1, 1, 256)
layer = FrozenBNBLinear(torch.randint(0, 256, (16, 12), dtype=torch.uint8), torch.rand(16), code,
                        bias=torch.zeros(16))
add_adapters(layer)
wte = nn.Embedding(50, 12)
optimizer = torch.optim.Adam(list(layer.adapter.parameters()) + list(wte.parameters()), lr=1e-3)
input_ids = torch.randint(0, 50, (2, 5))
hidden_states = wte(input_ids)
out = layer(hidden_states)
loss = out.pow(2).mean()
optimizer.zero_grad()
loss.backward()
optimizer.step()
print(loss.item())
