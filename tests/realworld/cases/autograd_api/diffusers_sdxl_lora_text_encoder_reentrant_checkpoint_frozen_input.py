"""diffusers' train_dreambooth_lora_sdxl.py with --train_text_encoder and gradient checkpointing: the frozen text encoder's embeddings output does not require grad, so the reentrant torch.utils.checkpoint around each encoder layer returns outputs without a graph and the text-encoder LoRA layers never get a gradient (the issue's warning "None of the inputs have requires_grad=True. Gradients will be None").

source: https://github.com/huggingface/diffusers/issues/5016
kind: bug
symptom: silent
verified: after 5 AdamW steps (lr 1e-3) the text-encoder lora_linear_layer.up weights are still all 0.0 (no gradient ever reaches them) while the unet LoRA up weight moved by 0.0047; with use_reentrant=False the text-encoder up weights move by 0.0048 and 0.0050 (max abs)
"""
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint

warnings.filterwarnings("ignore")


class LoRALinearLayer(nn.Module):
    def __init__(self, in_features, out_features, rank=4):
        super().__init__()
        self.down = nn.Linear(in_features, rank, bias=False)
        self.up = nn.Linear(rank, out_features, bias=False)
        nn.init.normal_(self.down.weight, std=1 / rank)
        nn.init.zeros_(self.up.weight)

    def forward(self, hidden_states):
        return self.up(self.down(hidden_states))


class LoRACompatibleLinear(nn.Linear):
    def __init__(self, in_features, out_features):
        super().__init__(in_features, out_features)
        self.lora_linear_layer = None

    def forward(self, x):
        out = super().forward(x)
        return out if self.lora_linear_layer is None else out + self.lora_linear_layer(x)


class CLIPEncoderLayer(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.layer_norm1 = nn.LayerNorm(dim)
        self.v_proj = LoRACompatibleLinear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, hidden_states):
        hidden_states = hidden_states + self.v_proj(self.layer_norm1(hidden_states))
        return hidden_states + self.mlp(hidden_states)


class CLIPTextModel(nn.Module):
    def __init__(self, vocab=100, dim=32, n_layers=2):
        super().__init__()
        self.embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList([CLIPEncoderLayer(dim) for _ in range(n_layers)])
        self.gradient_checkpointing = False

    def gradient_checkpointing_enable(self):
        self.gradient_checkpointing = True

    def forward(self, input_ids):
        hidden_states = self.embeddings(input_ids)
        for layer in self.layers:
            if self.gradient_checkpointing and self.training:
                hidden_states = torch.utils.checkpoint.checkpoint(layer, hidden_states, use_reentrant=True)  # ROOT
            else:
                hidden_states = layer(hidden_states)
        return hidden_states


torch.manual_seed(0)
text_encoder_one = CLIPTextModel()
unet = nn.Sequential(nn.Linear(32, 32), nn.SiLU(), nn.Linear(32, 32))
text_encoder_one.requires_grad_(False)
unet.requires_grad_(False)
unet_lora = LoRALinearLayer(32, 32)
text_lora_parameters_one = []
for layer in text_encoder_one.layers:
    layer.v_proj.lora_linear_layer = LoRALinearLayer(32, 32)
    text_lora_parameters_one.extend(layer.v_proj.lora_linear_layer.parameters())
text_encoder_one.gradient_checkpointing_enable()
text_encoder_one.train()
optimizer = torch.optim.AdamW(list(unet_lora.parameters()) + text_lora_parameters_one, lr=1e-3)
for step in range(5):
    input_ids = torch.randint(0, 100, (2, 8))
    noisy_latents, noise = torch.randn(2, 8, 32), torch.randn(2, 8, 32)
    prompt_embeds = text_encoder_one(input_ids)
    h = noisy_latents + prompt_embeds
    model_pred = unet(h) + unet_lora(h)
    loss = F.mse_loss(model_pred, noise)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
