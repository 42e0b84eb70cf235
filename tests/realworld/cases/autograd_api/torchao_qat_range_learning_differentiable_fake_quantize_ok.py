"""torchao QAT range learning after PR #2280: the per-group fake quantization calls the differentiable fake_quantize_affine, whose only custom autograd Function is a straight-through round, so the scales and zero points that range learning turns into nn.Parameters get gradients and are learned with the weights.

source: https://github.com/pytorch/ao/pull/2280
kind: lookalike
"""
from types import SimpleNamespace
import torch
import torch.nn.functional as F


class _Round(torch.autograd.Function):
    """Implementation of generic round operation with backward STE."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        return torch.round(x)

    @staticmethod
    def backward(ctx, gy: torch.Tensor) -> torch.Tensor:
        return gy


def fake_quantize_affine(input, block_size, scale, zero_point, quant_dtype, quant_min, quant_max, zero_point_domain=None):
    # torchao.quantization.quant_primitives, per-group layout (block_size = (1, group_size)) only
    x = input.reshape(input.shape[0], -1, block_size[1])
    quant = torch.clamp(_Round.apply(x * (1.0 / scale.unsqueeze(-1))) + zero_point.unsqueeze(-1), quant_min, quant_max)
    dequant = (quant - zero_point.unsqueeze(-1)) * scale.unsqueeze(-1)
    return dequant.reshape(input.shape)


def _fake_quantize_per_channel_group(input, scales, zero_points, quant_min, quant_max, group_size, zero_point_domain=None):
    assert input.shape[-1] % group_size == 0
    block_size = (1, group_size)
    return fake_quantize_affine(
        input, block_size, scales, zero_points, quant_dtype=torch.int32, quant_min=quant_min,
        quant_max=quant_max, zero_point_domain=zero_point_domain,
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
