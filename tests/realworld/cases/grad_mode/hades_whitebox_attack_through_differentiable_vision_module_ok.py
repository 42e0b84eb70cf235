"""HADES's white-box attack on LLaVA written the way the reporter made it work: the attack encodes the image through the CLIP vision module itself (`vision.vision_tower`), not through the tower's `@torch.no_grad()`-decorated `forward` that normal frozen-encoder use goes through, so the image features stay in the graph, the adversarial noise receives a gradient and the PGD steps lower the target loss.

source: https://github.com/AoiDragon/HADES/issues/10
kind: lookalike
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

    @torch.no_grad()
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
        features = self.vision.vision_tower(images).flatten(2).transpose(1, 2)
        return self.mm_projector(features)

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
