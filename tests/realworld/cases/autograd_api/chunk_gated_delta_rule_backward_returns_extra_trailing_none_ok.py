"""ChunkGatedDeltaRuleFunction.backward returns 10 values for 9 forward inputs, the extra one a trailing None, which autograd accepts.

source: https://github.com/QwenLM/FlashQLA/pull/10
kind: lookalike
"""
import torch


class ChunkGatedDeltaRuleFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens):
        gate = torch.sigmoid(g)
        o = scale * q * k * v * beta * gate + initial_state
        ctx.save_for_backward(q, k, v, gate, beta)
        ctx.scale = scale
        final_state = o.sum(dim=1, keepdim=True) if output_final_state else None
        return o, final_state

    @staticmethod
    def backward(ctx, do, dht):
        q, k, v, gate, beta = ctx.saved_tensors
        s = ctx.scale
        dq = do * s * k * v * beta * gate
        dk = do * s * q * v * beta * gate
        dv = do * s * q * k * beta * gate
        dg = do * s * q * k * v * beta * gate * (1 - gate)
        dbeta = do * s * q * k * v * gate
        dh0 = do
        return dq, dk, dv, dg, dbeta, None, dh0, None, None, None


def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False, cu_seqlens=None):
    if scale is None:
        scale = q.shape[-1] ** -0.5
    if initial_state is None:
        initial_state = torch.zeros_like(q)
    return ChunkGatedDeltaRuleFunction.apply(q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens)


torch.manual_seed(0)
q, k, v, g, beta = (torch.randn(2, 8, 16, requires_grad=True) for _ in range(5))
o, _ = chunk_gated_delta_rule(q, k, v, g, beta)
o.sum().backward()
