"""ColossalAI DreamBooth fine-tuning both models as the reply suggests: the unfrozen text encoder's parameters are given to the optimizer together with the unet's.

source: https://github.com/hpcaitech/ColossalAI/issues/3146
kind: lookalike
verified: the text encoder's q_proj weight moves
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
optimizer = torch.optim.Adam(list(unet.parameters()) + list(text_encoder.parameters()), lr=1e-3)
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
assert (text_encoder.q_proj.weight - initial_q).abs().max() > 0
