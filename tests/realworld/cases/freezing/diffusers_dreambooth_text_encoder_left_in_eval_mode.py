"""diffusers' train_dreambooth.py with --train_text_encoder calls unet.train() at each epoch but not text_encoder.train(), so the text encoder (loaded in eval mode by from_pretrained) is fine-tuned with its dropout off (the PR "Set train mode for text encoder").

source: https://github.com/huggingface/diffusers/pull/1012
kind: bug
symptom: silent
verified: the text encoder's dropout layers stay inactive during training: two forward passes of the same prompt in the training loop give identical embeddings (difference 0.0), against 0.35 apart (max abs) with text_encoder.train()
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class CLIPTextModel(nn.Module):
    def __init__(self, vocab=100, dim=32, dropout=0.1):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Dropout(dropout), nn.Linear(2 * dim, dim))
        self.final_layer_norm = nn.LayerNorm(dim)

    def forward(self, input_ids):
        h = self.token_embedding(input_ids)
        return self.final_layer_norm(h + self.mlp(h))

    @classmethod
    def from_pretrained(cls):
        model = cls()
        model.eval()
        return model


class UNet2DConditionModel(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.conv_in = nn.Linear(dim, dim)
        self.attn = nn.Linear(dim, dim)
        self.dropout = nn.Dropout(0.1)
        self.conv_out = nn.Linear(dim, dim)

    def forward(self, latents, encoder_hidden_states):
        h = F.silu(self.conv_in(latents))
        h = h + self.dropout(self.attn(encoder_hidden_states.mean(1, keepdim=True)))
        return self.conv_out(h)


torch.manual_seed(0)
text_encoder = CLIPTextModel.from_pretrained()
unet = UNet2DConditionModel()
train_text_encoder = True
optimizer = torch.optim.AdamW(list(unet.parameters()) + list(text_encoder.parameters()), lr=5e-6)
for epoch in range(2):
    unet.train()  # ROOT
    for step in range(3):
        input_ids = torch.randint(0, 100, (2, 8))
        latents, noise = torch.randn(2, 4, 32), torch.randn(2, 4, 32)
        encoder_hidden_states = text_encoder(input_ids)
        repeat = text_encoder(input_ids)
        model_pred = unet(latents, encoder_hidden_states)
        loss = F.mse_loss(model_pred, noise)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
