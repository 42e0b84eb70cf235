"""MONAI's PatchEmbeddingBlock with pos_embed_type="sincos" after PR #7564: after copying the sin-cos table into position_embeddings it sets position_embeddings.requires_grad = False, so the fixed positional encoding stays at its built values while the ViT trains.

source: https://github.com/Project-MONAI/MONAI/pull/7564
kind: lookalike
"""
import torch
import torch.nn as nn


def build_sincos_position_embedding(grid_size, embed_dim, spatial_dims=3, temperature=10000.0) -> nn.Parameter:
    # the 2D branch of monai.networks.blocks.pos_embed_utils
    h, w = grid_size
    grid_h, grid_w = torch.meshgrid(torch.arange(h, dtype=torch.float32), torch.arange(w, dtype=torch.float32), indexing="ij")
    pos_dim = embed_dim // 4
    omega = torch.arange(pos_dim, dtype=torch.float32) / pos_dim
    omega = 1.0 / (temperature**omega)
    out_h = torch.einsum("m,d->md", [grid_h.flatten(), omega])
    out_w = torch.einsum("m,d->md", [grid_w.flatten(), omega])
    pos_emb = torch.cat([torch.sin(out_w), torch.cos(out_w), torch.sin(out_h), torch.cos(out_h)], dim=1)[None, :, :]
    pos_embed = nn.Parameter(pos_emb)
    pos_embed.requires_grad = False
    return pos_embed


class PatchEmbeddingBlock(nn.Module):  # proj_type="conv" only, dropout left out
    def __init__(self, in_channels, img_size, patch_size, hidden_size, num_heads, proj_type="conv",
                 pos_embed_type="learnable", spatial_dims=2):
        super().__init__()
        self.pos_embed_type = pos_embed_type
        self.n_patches = (img_size // patch_size) ** spatial_dims
        self.patch_embeddings = nn.Conv2d(in_channels, hidden_size, kernel_size=patch_size, stride=patch_size)
        self.position_embeddings = nn.Parameter(torch.zeros(1, self.n_patches, hidden_size))
        if self.pos_embed_type == "learnable":
            nn.init.trunc_normal_(self.position_embeddings, mean=0.0, std=0.02, a=-2.0, b=2.0)
        elif self.pos_embed_type == "sincos":
            grid_size = [img_size // patch_size] * spatial_dims
            with torch.no_grad():
                pos_embeddings = build_sincos_position_embedding(grid_size, hidden_size, spatial_dims)
                self.position_embeddings.data.copy_(pos_embeddings.float())
                self.position_embeddings.requires_grad = False

    def forward(self, x):
        x = self.patch_embeddings(x)
        x = x.flatten(2).transpose(-1, -2)
        return x + self.position_embeddings


torch.manual_seed(0)
patch_embedding = PatchEmbeddingBlock(in_channels=1, img_size=16, patch_size=4, hidden_size=32, num_heads=4, pos_embed_type="sincos")
encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True), num_layers=1)
head = nn.Linear(32, 3)
model = nn.ModuleList([patch_embedding, encoder, head])
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
sincos = build_sincos_position_embedding([4, 4], 32, 2).detach().clone()
print("position_embeddings.requires_grad:", patch_embedding.position_embeddings.requires_grad)
for step in range(3):
    images, labels = torch.randn(4, 1, 16, 16), torch.randint(0, 3, (4,))
    loss = nn.functional.cross_entropy(head(encoder(patch_embedding(images)).mean(1)), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("sin-cos table max change:", (patch_embedding.position_embeddings.detach() - sincos).abs().max().item())
