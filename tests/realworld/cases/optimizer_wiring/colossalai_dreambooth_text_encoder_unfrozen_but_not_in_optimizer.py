"""ColossalAI's train_dreambooth_colossalai.py wraps only unet.parameters() in the optimizer; the reporter sets text_encoder.requires_grad_(True) and text_encoder.train(), the text encoder then gets gradients every step but is never updated.

source: https://github.com/hpcaitech/ColossalAI/issues/3146
kind: bug
symptom: silent
verified: after 10 Adam steps (lr 1e-3) the text encoder's q_proj weight is unchanged (max abs difference 0.0) although its gradient has norm 0.054 at the last step; with the text encoder's parameters in the optimizer it moves by 0.0087
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class CLIPTextModel(nn.Module):
    def __init__(self, vocab=100, dim=32):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab, dim)
        self.q_proj = nn.Linear(dim, dim)
        self.final_layer_norm = nn.LayerNorm(dim)

    def forward(self, input_ids):
        h = self.token_embedding(input_ids)
        return self.final_layer_norm(h + torch.tanh(self.q_proj(h)))


class UNet2DConditionModel(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.conv_in = nn.Linear(dim, dim)
        self.attn = nn.Linear(dim, dim)
        self.conv_out = nn.Linear(dim, dim)

    def forward(self, latents, encoder_hidden_states):
        h = F.silu(self.conv_in(latents))
        h = h + self.attn(encoder_hidden_states.mean(1, keepdim=True))
        return self.conv_out(h)


torch.manual_seed(0)
text_encoder = CLIPTextModel()
unet = UNet2DConditionModel()
text_encoder.requires_grad_(True)
text_encoder.train()
optimizer = torch.optim.Adam(unet.parameters(), lr=1e-3)  # ROOT
initial_q = text_encoder.q_proj.weight.detach().clone()
for step in range(10):
    input_ids = torch.randint(0, 100, (2, 8))
    latents, noise = torch.randn(2, 4, 32), torch.randn(2, 4, 32)
    encoder_hidden_states = text_encoder(input_ids)
    model_pred = unet(latents, encoder_hidden_states)
    loss = F.mse_loss(model_pred, noise)
    optimizer.zero_grad()
    text_encoder.zero_grad()
    loss.backward()
    optimizer.step()
