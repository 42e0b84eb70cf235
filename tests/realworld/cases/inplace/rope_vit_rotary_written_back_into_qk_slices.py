"""RoPE-ViT's `RoPEAttention` rotates every patch token but the class token by writing the rotated tensors back into slices of q and k (`q[:, :, 1:], k[:, :, 1:] = apply_rotary_emb(q[:, :, 1:], k[:, :, 1:], freqs_cis)`). `apply_rotary_emb` views its inputs as complex numbers (`view_as_complex` of a reshape, i.e. views of q and k) and multiplies them by the learnable RoPE-Mixed frequencies, which saves those views for backward; the slice assignment then bumps their version, and the first `loss.backward()` fails.

source: https://github.com/naver-ai/rope-vit/issues/14
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation: [CPUComplexFloatType [4, 2, 16, 4]], which is output 0 of ViewAsComplex, is at version 2; expected version 0 instead
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)
GRID, DIM, HEADS = 4, 16, 2


def init_t_xy(end_x, end_y):
    t = torch.arange(end_x * end_y, dtype=torch.float32)
    return (t % end_x).float(), torch.div(t, end_x, rounding_mode="floor").float()


def compute_mixed_cis(freqs, t_x, t_y, num_heads):
    n = t_x.shape[0]
    freqs_x = (t_x.unsqueeze(-1) @ freqs[0].unsqueeze(-2)).view(n, num_heads, -1).permute(1, 0, 2)
    freqs_y = (t_y.unsqueeze(-1) @ freqs[1].unsqueeze(-2)).view(n, num_heads, -1).permute(1, 0, 2)
    return torch.polar(torch.ones_like(freqs_x), freqs_x + freqs_y)


def apply_rotary_emb(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


class RoPEAttention(nn.Module):
    def __init__(self, dim=DIM, num_heads=HEADS):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        head_dim = dim // num_heads
        mag = 1 / (10.0 ** (torch.arange(0, head_dim, 2)[: head_dim // 2].float() / head_dim))
        self.freqs = nn.Parameter(torch.stack([mag.repeat(num_heads), mag.repeat(num_heads)]))
        t_x, t_y = init_t_xy(GRID, GRID)
        self.register_buffer("t_x", t_x)
        self.register_buffer("t_y", t_y)

    def forward(self, x):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.num_heads, c // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        freqs_cis = compute_mixed_cis(self.freqs, self.t_x, self.t_y, self.num_heads)
        q[:, :, 1:], k[:, :, 1:] = apply_rotary_emb(q[:, :, 1:], k[:, :, 1:], freqs_cis)  # ROOT
        attn = (q @ k.transpose(-2, -1) * (c // self.num_heads) ** -0.5).softmax(dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(b, n, c))


class TinyRoPEViT(nn.Module):
    def __init__(self, classes=3):
        super().__init__()
        self.patch = nn.Conv2d(1, DIM, 2, stride=2)
        self.cls = nn.Parameter(torch.zeros(1, 1, DIM))
        self.norm = nn.LayerNorm(DIM)
        self.attn = RoPEAttention()
        self.head = nn.Linear(DIM, classes)

    def forward(self, img):
        x = self.patch(img).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(len(x), -1, -1), x], dim=1)
        x = x + self.attn(self.norm(x))
        return self.head(x[:, 0])


model = TinyRoPEViT()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
images, labels = torch.randn(4, 1, 2 * GRID, 2 * GRID), torch.tensor([0, 1, 2, 1])
for step in range(3):
    loss = nn.functional.cross_entropy(model(images), labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step}: loss {loss.item():.4f}")
