"""SimAC's PGD protection loop with the feature-map loss kept in the graph (`loss = loss + target_loss`, as the reporter expected): the gradient of the perturbed images now comes from both the noise-prediction loss and the distance between noisy and clean UNet feature maps, so the feature term steers the adversarial perturbation.

source: https://github.com/somuchtome/SimAC/issues/3
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class TinyEncoder(nn.Module):
    """Stands in for the VAE encoder: image -> latent."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.SiLU(), nn.Conv2d(8, 4, 3, padding=1))

    def forward(self, x):
        return self.net(x)


class TinyUNet(nn.Module):
    """Stands in for the diffusion UNet; also returns the decoder feature map that SimAC compares."""

    def __init__(self):
        super().__init__()
        self.down = nn.Sequential(nn.Conv2d(4 + 1, 16, 3, stride=2, padding=1), nn.SiLU())
        self.up = nn.Sequential(nn.ConvTranspose2d(16, 16, 4, stride=2, padding=1), nn.SiLU())
        self.out = nn.Conv2d(16, 4, 3, padding=1)

    def forward(self, latents, timesteps):
        t = timesteps.float().view(-1, 1, 1, 1).expand(-1, 1, *latents.shape[2:]) / 1000
        h = self.down(torch.cat([latents, t], 1))
        up_features = self.up(h)
        return self.out(up_features), up_features


def add_noise(latents, noise, timesteps):
    alpha = (1 - timesteps.float() / 1000).view(-1, 1, 1, 1)
    return alpha.sqrt() * latents + (1 - alpha).sqrt() * noise


def pgd_attack(unet, encoder, perturbed_images, original_images, steps=10, pgd_alpha=2 / 255, pgd_eps=8 / 255,
               feature_loss_weight=1.0):
    for step in range(steps):
        perturbed_images.requires_grad_(True)
        latents = encoder(perturbed_images)
        noise = torch.randn_like(latents)
        timesteps = torch.randint(700, 1000, (latents.shape[0],))
        noisy_latents = add_noise(latents, noise, timesteps)
        model_pred, noise_features = unet(noisy_latents, timesteps)
        loss = F.mse_loss(model_pred.float(), noise.float(), reduction="mean")
        with torch.no_grad():
            clean_latents = encoder(original_images)
            _, clean_features = unet(add_noise(clean_latents, noise, timesteps), timesteps)
        target_loss = F.mse_loss(noise_features.float(), clean_features.float(), reduction="mean")
        unet.zero_grad()
        encoder.zero_grad()
        loss = loss + feature_loss_weight * target_loss
        loss.backward()
        adv_images = perturbed_images + pgd_alpha * perturbed_images.grad.sign()
        eta = torch.clamp(adv_images - original_images, min=-pgd_eps, max=+pgd_eps)
        perturbed_images = torch.clamp(original_images + eta, min=-1, max=+1).detach_()
        print(f"PGD step {step}: loss {loss.item():.4f}, target_loss {target_loss.item():.4f}")
    return perturbed_images


encoder, unet = TinyEncoder(), TinyUNet()
for p in list(encoder.parameters()) + list(unet.parameters()):
    p.requires_grad_(False)
original = torch.rand(2, 3, 32, 32) * 2 - 1
protected = pgd_attack(unet, encoder, original.clone(), original)
print("max perturbation:", (protected - original).abs().max().item())
