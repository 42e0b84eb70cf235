"""Null-text inversion: the conditional text embedding keeps the text encoder's graph across steps.

source: https://github.com/tejank10/null-text-inversion/issues/1
kind: bug
symptom: crash
verified: Trying to backward through the graph a second time
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
text_encoder = nn.Sequential(nn.Embedding(50, 16), nn.Linear(16, 16))
unet = nn.Linear(16 + 8, 8)


def get_text_embedding(ids):
    return text_encoder(ids).mean(1)


def null_text_inversion(latents, prompt_ids, num_inner_steps=3, guidance=7.5):
    uncond_embeddings = get_text_embedding(torch.zeros_like(prompt_ids)).detach()
    cond_embeddings = get_text_embedding(prompt_ids)  # ROOT
    uncond_embeddings.requires_grad_(True)
    optimizer = torch.optim.Adam([uncond_embeddings], lr=1e-2)
    latent_prev, latent_cur = latents[1], latents[0]
    for j in range(num_inner_steps):
        noise_uncond = unet(torch.cat([latent_cur, uncond_embeddings], -1))
        noise_cond = unet(torch.cat([latent_cur, cond_embeddings], -1))
        noise_pred = noise_uncond + guidance * (noise_cond - noise_uncond)
        loss = F.mse_loss(latent_cur - 0.1 * noise_pred, latent_prev)
        optimizer.zero_grad()
        loss.backward()  # SYMPTOM
        optimizer.step()
    return uncond_embeddings.detach()


print(null_text_inversion(torch.randn(2, 1, 8), torch.randint(1, 50, (1, 5))).shape)
