"""HADES's white-box attack on LLaVA optimises an adversarial image noise with PGD: `images = noise + image`, `images.requires_grad = True`, loss of the target text, `loss.backward()`, then `adv_noise.data - alpha * adv_noise.grad.detach().sign()`. LLaVA encodes images through its CLIP vision tower, whose `forward` is decorated with `@torch.no_grad()` (the tower is meant to be frozen), so the image features do not require grad (the reporter's check: `image_features.requires_grad` is False); the loss still backpropagates into the language model's weights, but the noise gets no gradient and the first attack step fails on `adv_noise.grad` being None.

source: https://github.com/AoiDragon/HADES/issues/10
kind: bug
symptom: crash
verified: AttributeError: 'NoneType' object has no attribute 'detach'
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)
VOCAB, DIM = 40, 24


class CLIPVisionTower(nn.Module):
    def __init__(self):
        super().__init__()
        self.vision_tower = nn.Sequential(nn.Conv2d(3, DIM, 4, stride=4), nn.GELU())

    @torch.no_grad()  # ROOT
    def forward(self, images):
        return self.vision_tower(images).flatten(2).transpose(1, 2)


class TinyLlava(nn.Module):
    def __init__(self):
        super().__init__()
        self.vision = CLIPVisionTower()
        self.mm_projector = nn.Linear(DIM, DIM)
        self.embed = nn.Embedding(VOCAB, DIM)
        self.block = nn.TransformerEncoderLayer(DIM, 4, 48, dropout=0.0, batch_first=True)
        self.lm_head = nn.Linear(DIM, VOCAB)

    def encode_images(self, images):
        return self.mm_projector(self.vision(images))

    def forward(self, images, input_ids, labels):
        image_features = self.encode_images(images)
        embeds = torch.cat([image_features, self.embed(input_ids)], dim=1)
        logits = self.lm_head(self.block(embeds))[:, image_features.shape[1] - 1:]
        return nn.functional.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1))


def normalize(x):
    return (x - 0.5) / 0.25


def attack(model, image, target_ids, epsilon=16 / 255, alpha=1 / 255, num_iter=5):
    adv_noise = torch.rand_like(image) * 2 * epsilon - epsilon
    adv_noise.requires_grad_(True)
    for step in range(num_iter):
        x_adv = normalize((image + adv_noise).clamp(0, 1))
        loss = model(x_adv, target_ids[:, :-1], target_ids)
        loss.backward()
        adv_noise.data = (adv_noise.data - alpha * adv_noise.grad.detach().sign()).clamp(-epsilon, epsilon)
        adv_noise.grad.zero_()
        model.zero_grad()
        print(f"attack step {step}: target loss {loss.item():.4f}")
    return (image + adv_noise).clamp(0, 1).detach()


model = TinyLlava().eval()
image = torch.rand(1, 3, 16, 16)
target = torch.randint(0, VOCAB, (1, 6))
adversarial = attack(model, image, target)
print("perturbation L_inf:", (adversarial - image).abs().max().item())
