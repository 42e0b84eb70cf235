"""Prompt-embedding optimization through a DeepFloyd-IF-style pipeline whose encode_prompt keeps the graph.

source: https://github.com/huggingface/diffusers/pull/13688
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class TinyUNet(nn.Module):
    def __init__(self, dim=8, cond_dim=16):
        super().__init__()
        self.conv_in = nn.Conv2d(3, dim, 3, padding=1)
        self.cond_proj = nn.Linear(cond_dim, dim)
        self.lora_down = nn.Linear(cond_dim, 4, bias=False)
        self.lora_up = nn.Linear(4, dim, bias=False)
        self.conv_out = nn.Conv2d(dim, 3, 3, padding=1)

    def forward(self, x, encoder_hidden_states):
        cond = encoder_hidden_states.mean(1)
        cond = self.cond_proj(cond) + self.lora_up(self.lora_down(cond))
        h = torch.relu(self.conv_in(x) + cond[:, :, None, None])
        return self.conv_out(h)


class IFPipeline:
    def __init__(self, text_encoder, unet):
        self.text_encoder = text_encoder
        self.unet = unet

    def encode_prompt(self, prompt=None, num_images_per_prompt=1, prompt_embeds=None):
        if prompt_embeds is None:
            prompt_embeds = self.text_encoder(prompt)
        bs_embed, seq_len, _ = prompt_embeds.shape
        prompt_embeds = prompt_embeds.repeat(1, num_images_per_prompt, 1)
        prompt_embeds = prompt_embeds.view(bs_embed * num_images_per_prompt, seq_len, -1)
        negative_prompt_embeds = torch.zeros_like(prompt_embeds)
        return prompt_embeds, negative_prompt_embeds


unet = TinyUNet()
for name, p in unet.named_parameters():
    p.requires_grad = name.startswith("lora")
pipe = IFPipeline(text_encoder=nn.Embedding(100, 16), unet=unet)
prompt_embeds = nn.Parameter(torch.randn(1, 4, 16) * 0.1)
lora_params = [p for p in unet.parameters() if p.requires_grad]
optimizer = torch.optim.AdamW([prompt_embeds] + lora_params, lr=1e-2)
for step in range(5):
    images = torch.randn(1, 3, 8, 8)
    noise = torch.randn_like(images)
    embeds, _ = pipe.encode_prompt(prompt_embeds=prompt_embeds)
    noise_pred = pipe.unet(images + noise, embeds)
    loss = F.mse_loss(noise_pred, noise)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(prompt_embeds.grad)
