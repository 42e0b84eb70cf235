"""sd-scripts' SD3 Sd3TextEncodingStrategy.encode_tokens runs CLIP-L and CLIP-G inside torch.no_grad(); when sd3_train_network trains the text encoders' LoRA it encodes the captions through this method at every step, so the text-encoder LoRA modules never get a gradient and stay at their initial weights while the MMDiT LoRA trains.

source: https://github.com/kohya-ss/sd-scripts/commit/db2b4d41b9637cffd40a694c8e25847446a57aad
kind: bug
symptom: silent
verified: after 4 steps every lora_te1_*/lora_te2_* parameter has grad None and max change 0.0, while the lora_unet_* parameters move (max change about 4e-3)
"""
from types import SimpleNamespace

import torch
from torch import nn


class TinyCLIPTextModel(nn.Module):  # stands for CLIPTextModel / CLIPTextModelWithProjection
    def __init__(self, width, vocab_size=64):
        super().__init__()
        self.embeddings = nn.Embedding(vocab_size, width)
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(2))

    def forward(self, input_ids, attention_mask=None, output_hidden_states=False):
        h, hidden_states = self.embeddings(input_ids), []
        for layer in self.layers:
            h = torch.tanh(layer(h))
            hidden_states.append(h)
        return SimpleNamespace(pooled=h[:, -1], hidden_states=hidden_states)


class LoRAModule(nn.Module):  # networks/lora.py: replaces the Linear's forward
    def __init__(self, lora_name, org_module, multiplier=1.0, lora_dim=4, alpha=1):
        super().__init__()
        self.lora_name = lora_name
        self.lora_down = nn.Linear(org_module.in_features, lora_dim, bias=False)
        self.lora_up = nn.Linear(lora_dim, org_module.out_features, bias=False)
        nn.init.normal_(self.lora_up.weight, std=0.01)  # zeros in sd-scripts; nonzero so lora_down's gradient shows too
        self.scale, self.multiplier, self.org_module = alpha / lora_dim, multiplier, org_module

    def apply_to(self):
        self.org_forward = self.org_module.forward
        self.org_module.forward = self.forward
        del self.org_module

    def forward(self, x):
        return self.org_forward(x) + self.lora_up(self.lora_down(x)) * self.multiplier * self.scale


class Sd3TextEncodingStrategy:  # dropout rates and T5 left out (t5xxl is None here)
    def encode_tokens(self, tokenize_strategy, models, tokens):
        clip_l, clip_g, t5xxl = models
        l_tokens, g_tokens, t5_tokens = tokens[:3]
        with torch.no_grad():  # ROOT
            prompt_embeds = clip_l(l_tokens, None, output_hidden_states=True)
            l_pooled = prompt_embeds.pooled
            l_out = prompt_embeds.hidden_states[-2]
            prompt_embeds = clip_g(g_tokens, None, output_hidden_states=True)
            g_pooled = prompt_embeds.pooled
            g_out = prompt_embeds.hidden_states[-2]
            lg_pooled = torch.cat((l_pooled, g_pooled), dim=-1)
            lg_out = torch.cat([l_out, g_out], dim=-1)
        return [lg_out, None, lg_pooled]


torch.manual_seed(0)
clip_l, clip_g = TinyCLIPTextModel(8), TinyCLIPTextModel(12)
mmdit = nn.Sequential(nn.Linear(20, 20), nn.GELU(), nn.Linear(20, 4))  # stands for the MMDiT
for m in (clip_l, clip_g, mmdit):
    m.requires_grad_(False)
network = nn.ModuleList(
    [LoRAModule(f"lora_te1_layers_{i}", l) for i, l in enumerate(clip_l.layers)]
    + [LoRAModule(f"lora_te2_layers_{i}", l) for i, l in enumerate(clip_g.layers)]
    + [LoRAModule(f"lora_unet_{i}", mmdit[i]) for i in (0, 2)])
for lora in network:
    lora.apply_to()
optimizer = torch.optim.AdamW(network.parameters(), lr=1e-3)
text_encoding_strategy = Sd3TextEncodingStrategy()
before = {n: p.detach().clone() for n, p in network.named_parameters()}
for step in range(4):
    input_ids = torch.randint(0, 64, (2, 6))
    latents, noise = torch.randn(2, 4), torch.randn(2, 4)
    lg_out, t5_out, lg_pooled = text_encoding_strategy.encode_tokens(None, [clip_l, clip_g, None], [input_ids, input_ids, None])
    model_pred = mmdit(lg_out.mean(dim=1) + lg_pooled) + latents  # stands for the MMDiT conditioned on context and pooled y
    loss = torch.nn.functional.mse_loss(model_pred, noise)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=False)
for lora, (name, p) in zip([l for l in network for _ in l.parameters()], network.named_parameters()):
    print(lora.lora_name, name.split(".", 1)[1], "grad None" if p.grad is None else "grad ok",
          "max change", round((p.detach() - before[name]).abs().max().item(), 6))
