"""torchao QAT range learning turns each FakeQuantizer's scale and zero point into nn.Parameters, but the per-group fake quantization runs through _GenericFakeQuantize, a custom autograd Function whose backward returns None for every input except the tensor being quantized: the scales and zero points never get a gradient and the learned ranges stay at their initial values.

source: https://github.com/pytorch/ao/pull/2280
kind: bug
symptom: silent
verified: after 4 Adam steps weight_fake_quantizer.scale and .zero_point have grad None and max change 0.0, while the linear weights move (max change about 4e-3)
"""
from types import SimpleNamespace
from typing import List

import torch
import torch.nn.functional as F


def fake_quantize_affine_cachemask(input, block_size, scale, zero_point, quant_dtype, quant_min, quant_max):
    # torchao.quantization.quant_primitives, per-group layout (block_size = (1, group_size)) only
    x = input.reshape(input.shape[0], -1, block_size[1])
    q = torch.round(x / scale.unsqueeze(-1)) + zero_point.unsqueeze(-1)
    mask = (q >= quant_min) & (q <= quant_max)
    dq = (torch.clamp(q, quant_min, quant_max) - zero_point.unsqueeze(-1)) * scale.unsqueeze(-1)
    return dq.reshape(input.shape), mask.reshape(input.shape)


class _GenericFakeQuantize(torch.autograd.Function):
    """Implementation of generic fake quantize with backward STE."""

    @staticmethod
    def forward(ctx, input: torch.Tensor, block_size: List[int], scales: torch.Tensor,
                zero_points: torch.Tensor, quant_min: int, quant_max: int, zero_point_domain=None) -> torch.Tensor:
        (fq, mask) = fake_quantize_affine_cachemask(input, block_size, scales, zero_points, torch.int32,
                                                    quant_min, quant_max)
        ctx.save_for_backward(mask)
        return fq

    @staticmethod
    def backward(ctx, gy):
        (mask,) = ctx.saved_tensors
        return gy * mask, None, None, None, None, None, None


def _fake_quantize_per_channel_group(input, scales, zero_points, quant_min, quant_max, group_size, zero_point_domain=None):
    assert input.shape[-1] % group_size == 0
    block_size = (1, group_size)
    return _GenericFakeQuantize.apply(  # ROOT
        input, block_size, scales, zero_points, quant_min, quant_max, zero_point_domain,
    )


class FakeQuantizer(torch.nn.Module):  # PerGroup, symmetric int4, range learning; other granularities left out
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.scale, self.zero_point = None, None
        self._scale_eps = 1e-9

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        group_size = self.config.group_size
        if self.scale is None or self.zero_point is None:  # get_group_qparams_symmetric
            amax = x.detach().reshape(x.shape[0], -1, group_size).abs().amax(-1)
            self.scale, self.zero_point = amax / 7.5, torch.zeros_like(amax)
            self._maybe_update_qparams_for_range_learning()
        qmin, qmax = -8, 7
        return _fake_quantize_per_channel_group(x, self.scale, self.zero_point, qmin, qmax, group_size)

    def _maybe_update_qparams_for_range_learning(self) -> None:
        if not self.config.range_learning or isinstance(self.scale, torch.nn.Parameter):
            return
        scale = torch.clamp(self.scale, min=self._scale_eps)
        zero_point = torch.clamp(torch.round(self.zero_point), -8, 7)
        self.scale = torch.nn.Parameter(scale, requires_grad=True)
        self.zero_point = torch.nn.Parameter(zero_point, requires_grad=True)


class FakeQuantizedLinear(torch.nn.Linear):
    def __init__(self, in_features, out_features, bias=False, weight_config=None):
        super().__init__(in_features, out_features, bias)
        self.weight_fake_quantizer = FakeQuantizer(weight_config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight_fake_quantizer(self.weight)
        return F.linear(x, w, self.bias)


torch.manual_seed(0)
weight_config = SimpleNamespace(dtype="int4", group_size=8, is_symmetric=True, range_learning=True)
model = torch.nn.Sequential(FakeQuantizedLinear(16, 32, weight_config=weight_config), torch.nn.ReLU(),
                            FakeQuantizedLinear(32, 4, weight_config=weight_config))
model(torch.randn(2, 16))  # initialize_fake_quantizers: scales and zero points become Parameters
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
before = {n: p.detach().clone() for n, p in model.named_parameters()}
for step in range(4):
    x, y = torch.randn(8, 16), torch.randn(8, 4)
    loss = F.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
for n, p in model.named_parameters():
    print(n, "grad None" if p.grad is None else "grad ok", "max change", round((p.detach() - before[n]).abs().max().item(), 6))
