"""The vision-transformer tutorial notebook as the author confirmed it should be: the attention weights are softmax(dim=-1) over the keys, so each query's weights sum to 1.

source: https://github.com/nerminnuraydogan/vision-transformer/issues/1
kind: lookalike
"""
import torch
import torch.nn as nn


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, embed_dim=32, num_heads=4):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.qkv = nn.Linear(embed_dim, embed_dim * 3)
        self.proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attention_scores = (q @ k.transpose(-2, -1)) * self.head_dim ** -0.5
        attention_weights = attention_scores.softmax(dim=-1)
        self.attention_weights = attention_weights
        out = (attention_weights @ v).transpose(1, 2).reshape(B, N, C)
        return self.proj(out)


class ViT(nn.Module):
    def __init__(self, image_size=16, patch_size=4, embed_dim=32, num_classes=10):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, embed_dim, patch_size, stride=patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.randn(1, (image_size // patch_size) ** 2 + 1, embed_dim) * 0.02)
        self.norm1 = nn.LayerNorm(embed_dim)
        self.attn = MultiHeadSelfAttention(embed_dim)
        self.norm2 = nn.LayerNorm(embed_dim)
        self.mlp = nn.Sequential(nn.Linear(embed_dim, 64), nn.GELU(), nn.Linear(64, embed_dim))
        self.head = nn.Linear(embed_dim, num_classes)

    def forward(self, img):
        x = self.patch_embed(img).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.size(0), -1, -1), x], dim=1) + self.pos_embed
        x = x + self.attn(self.norm1(x))
        x = x + self.mlp(self.norm2(x))
        return self.head(x[:, 0])


torch.manual_seed(0)
model = ViT()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
images, labels = torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,))
for step in range(5):
    loss = nn.functional.cross_entropy(model(images), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
row_sums = model.attn.attention_weights.sum(-1)
assert torch.allclose(row_sums, torch.ones_like(row_sums))
