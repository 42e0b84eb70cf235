"""TileOPs after the fix: the multi-head attention forward custom op is wired to its backward kernel with `register_autograd` (a `setup_context` saving q, k, v and the scale, and a backward that calls the backward custom op), so `loss.backward()` runs through the attention and the training loss falls.

source: https://github.com/tile-ai/TileOPs/issues/649
kind: lookalike
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


@torch.library.custom_op("tileops_fixed::mha_fwd", mutates_args=())
def mha_fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    probs = torch.softmax(q @ k.transpose(-1, -2) * scale, dim=-1)
    return probs @ v


@mha_fwd.register_fake
def _(q, k, v, scale):
    return torch.empty_like(q)


@torch.library.custom_op("tileops_fixed::mha_bwd", mutates_args=())
def mha_bwd(do: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
            scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    probs = torch.softmax(q @ k.transpose(-1, -2) * scale, dim=-1)
    dv = probs.transpose(-1, -2) @ do
    dp = do @ v.transpose(-1, -2)
    ds = probs * (dp - (dp * probs).sum(-1, keepdim=True))
    return ds @ k * scale, ds.transpose(-1, -2) @ q * scale, dv


@mha_bwd.register_fake
def _(do, q, k, v, scale):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _mha_setup_context(ctx, inputs, output):
    q, k, v, scale = inputs
    ctx.save_for_backward(q, k, v)
    ctx.scale = scale


def _mha_backward(ctx, do):
    q, k, v = ctx.saved_tensors
    dq, dk, dv = mha_bwd(do.contiguous(), q, k, v, ctx.scale)
    return dq, dk, dv, None


mha_fwd.register_autograd(_mha_backward, setup_context=_mha_setup_context)


class MultiHeadAttentionOp(nn.Module):
    """The op layer: picks the kernel and reshapes heads."""

    def __init__(self, heads):
        super().__init__()
        self.heads = heads

    def forward(self, q, k, v):
        return mha_fwd(q, k, v, q.shape[-1] ** -0.5)


class AttentionBlock(nn.Module):
    def __init__(self, dim=32, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.attn = MultiHeadAttentionOp(heads)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        o = self.attn(q.contiguous(), k.contiguous(), v.contiguous())
        return x + self.out(o.transpose(1, 2).reshape(b, t, d))


model = nn.Sequential(AttentionBlock(), AttentionBlock(), nn.Linear(32, 5))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(8, 12, 32)
y = torch.randint(0, 5, (8,))
for step in range(3):
    logits = model(x).mean(1)
    loss = nn.functional.cross_entropy(logits, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step}: loss {loss.item():.4f}")
