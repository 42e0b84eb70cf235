"""StyleGAN-NADA's `CLIPLoss` after its fix: right after loading the CLIP model it calls `self.model.requires_grad_(False)`, so the backward pass of the directional CLIP loss reaches the trainable generator through the image features but computes and keeps no gradient for CLIP's own weights.

source: https://github.com/rinongal/StyleGAN-nada/commit/a81bf923b962fd19de889f04e5ba2de167ebbf86
kind: lookalike
"""
import argparse

import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_num_threads(1)


class TinyCLIP(nn.Module):
    """Stand-in for `clip.load(...)`: an image encoder and a bag-of-tokens text encoder into one space."""

    def __init__(self, vocab=64, dim=32):
        super().__init__()
        self.visual = nn.Sequential(nn.Conv2d(3, 16, 4, stride=4), nn.GELU(), nn.Flatten(), nn.Linear(16 * 16, dim))
        self.token_embedding = nn.EmbeddingBag(vocab, dim)
        self.text_projection = nn.Linear(dim, dim)

    def encode_image(self, images):
        return self.visual(images)

    def encode_text(self, tokens):
        return self.text_projection(self.token_embedding(tokens))


def tokenize(strings, vocab=64):
    return torch.tensor([[(sum(map(ord, s)) * (i + 1)) % vocab for i in range(6)] for s in strings])


class CLIPLoss(torch.nn.Module):
    def __init__(self, lambda_direction=1.):
        super().__init__()
        self.model = TinyCLIP()
        self.model.requires_grad_(False)
        self.lambda_direction = lambda_direction
        self.target_direction = None

    def encode_images(self, images):
        return self.model.encode_image((images + 1) / 2)

    def get_text_features(self, class_str):
        text_features = self.model.encode_text(tokenize([f"a photo of a {class_str}"])).detach()
        text_features /= text_features.norm(dim=-1, keepdim=True)
        return text_features

    def get_image_features(self, img):
        image_features = self.encode_images(img)
        image_features /= image_features.clone().norm(dim=-1, keepdim=True)
        return image_features

    def compute_text_direction(self, source_class, target_class):
        direction = self.get_text_features(target_class) - self.get_text_features(source_class)
        return direction / direction.norm(dim=-1, keepdim=True)

    def clip_directional_loss(self, src_img, source_class, target_img, target_class):
        if self.target_direction is None:
            self.target_direction = self.compute_text_direction(source_class, target_class)
        edit_direction = self.get_image_features(target_img) - self.get_image_features(src_img)
        edit_direction = edit_direction / (edit_direction.norm(dim=-1, keepdim=True) + 1e-7)
        return (1. - F.cosine_similarity(edit_direction, self.target_direction)).mean()

    def forward(self, src_img, source_class, target_img, target_class):
        return self.lambda_direction * self.clip_directional_loss(src_img, source_class, target_img, target_class)


class Generator(nn.Module):
    def __init__(self, z_dim=16):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(z_dim, 3 * 16 * 16), nn.Tanh())

    def forward(self, z):
        return self.net(z).view(-1, 3, 16, 16)


class ZSSGAN(torch.nn.Module):
    def __init__(self, args):
        super().__init__()
        self.generator_frozen = Generator()
        self.generator_trainable = Generator()
        self.generator_trainable.load_state_dict(self.generator_frozen.state_dict())
        self.generator_frozen.requires_grad_(False)
        self.generator_frozen.eval()
        self.generator_trainable.train()

        self.clip_loss_models = {model_name: CLIPLoss() for model_name in args.clip_models}
        self.clip_model_weights = dict(zip(args.clip_models, args.clip_model_weights))
        self.source_class = args.source_class
        self.target_class = args.target_class

    def forward(self, z):
        with torch.no_grad():
            frozen_img = self.generator_frozen(z)
        trainable_img = self.generator_trainable(z)
        clip_loss = torch.sum(torch.stack([
            self.clip_model_weights[name] * self.clip_loss_models[name](
                frozen_img, self.source_class, trainable_img, self.target_class)
            for name in self.clip_model_weights]))
        return [frozen_img, trainable_img], clip_loss


args = argparse.Namespace(clip_models=["ViT-B/32"], clip_model_weights=[1.0],
                          source_class="photo", target_class="sketch", lr=2e-3, batch=8, iter=30)
net = ZSSGAN(args)
g_optim = torch.optim.Adam(net.generator_trainable.parameters(), lr=args.lr, betas=(0.0, 0.99))
clip_params = list(net.clip_loss_models["ViT-B/32"].parameters())
norms = []
for i in range(args.iter):
    net.train()
    sample_z = torch.randn(args.batch, 16)
    [sampled_src, sampled_dst], loss = net(sample_z)
    net.zero_grad()
    loss.backward()
    g_optim.step()
    grads = [p.grad for p in clip_params if p.grad is not None]
    norms.append(torch.norm(torch.stack([g.norm() for g in grads])).item() if grads else 0.0)

with_grad = sum(p.grad is not None for p in clip_params)
print(f"CLIP parameters holding a gradient after {args.iter} steps: {with_grad} of {len(clip_params)}")
print(f"CLIP gradient norm after step 2: {norms[1]:.3g}, after step {args.iter}: {norms[-1]:.4g}; last loss {loss.item():.3f}")
