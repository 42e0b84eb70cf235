"""recognize-anything's pretrain.py distills CLIP image features into RAM (`loss_dis = l1(image_cls_embeds, clip_feature)`), but calls `model_clip.encode_image(image)` outside `torch.no_grad()` on a CLIP model whose parameters still require grad: every backward runs through the whole CLIP image encoder and accumulates gradients in the teacher, which no optimizer clears or uses, and the distillation target itself is pulled toward the student.

source: https://github.com/xinyu1205/recognize-anything/commit/dc5402256107b78bc256b8cf0f251a5c89558560
kind: bug
symptom: silent
verified: after 5 steps 4/4 CLIP teacher parameter tensors hold a .grad that is never cleared (norm 0.55 at step 0, 1.48 at step 4) and clip_image_feature carries AddmmBackward0 into the loss
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class CLIP(nn.Module):
    """Stands in for `clip.load("ViT-B/16")`: an image encoder with encode_image; its parameters require grad."""

    def __init__(self, embed_dim=32):
        super().__init__()
        self.visual = nn.Sequential(nn.Conv2d(3, 16, 4, stride=4), nn.GELU(), nn.Flatten(), nn.Linear(16 * 4 * 4, embed_dim))

    def encode_image(self, image):
        return self.visual(image)


class RAM(nn.Module):
    """Stands in for ram(): image encoder, a projection distilled toward CLIP, a tagging head and a caption head."""

    def __init__(self, num_tags=10, vocab=20, embed_dim=32):
        super().__init__()
        self.visual_encoder = nn.Sequential(nn.Conv2d(3, 16, 4, stride=4), nn.ReLU(), nn.Flatten(), nn.Linear(256, 64))
        self.image_proj = nn.Linear(64, embed_dim)
        self.tagging_head = nn.Linear(64, num_tags)
        self.text_decoder = nn.Linear(64, vocab)
        self.label_embed = nn.Parameter(torch.randn(num_tags, embed_dim))

    def forward(self, image, caption, image_tag, parse_tag, clip_feature):
        image_embeds = self.visual_encoder(image)
        image_cls_embeds = self.image_proj(image_embeds)
        logits = self.tagging_head(image_embeds)
        loss_tag = F.binary_cross_entropy_with_logits(logits, image_tag)
        loss_t2t = F.cross_entropy(self.text_decoder(image_embeds), caption)
        loss_dis = F.l1_loss(image_cls_embeds, clip_feature)
        return loss_t2t, loss_tag, loss_dis


def train_ram(model, data_loader, optimizer, epoch, device, config, model_clip):
    model.train()
    for i, (image, caption, image_tag, parse_tag) in enumerate(data_loader):
        optimizer.zero_grad()
        image = image.to(device, non_blocking=True)

        clip_image_feature = model_clip.encode_image(image)  # ROOT

        loss_t2t, loss_tag, loss_dis = model(image, caption, image_tag, parse_tag, clip_image_feature)
        loss = loss_t2t + loss_tag / (loss_tag / loss_t2t).detach() + loss_dis

        loss.backward()
        optimizer.step()
        teacher_grad = torch.sqrt(sum(((p.grad ** 2).sum() for p in model_clip.parameters() if p.grad is not None), torch.tensor(0.)))
        print(f"step {i}: loss {loss.item():.4f}; clip_image_feature.grad_fn: {type(clip_image_feature.grad_fn).__name__}; "
              f"CLIP teacher .grad norm {teacher_grad.item():.4f}")


device = "cpu"
model_clip = CLIP().to(device)
model = RAM().to(device)
### Frozen label embedding for open-set recogniztion ###
model.label_embed.requires_grad = False
optimizer = torch.optim.AdamW(filter(lambda x: x.requires_grad, model.parameters()), lr=1e-3, weight_decay=0.05)
data_loader = [(torch.randn(4, 3, 16, 16), torch.randint(0, 20, (4,)), torch.randint(0, 2, (4, 10)).float(), None)
               for _ in range(5)]
train_ram(model, data_loader, optimizer, 0, device, {}, model_clip)
with_grad = sum(p.grad is not None for p in model_clip.parameters())
print(f"CLIP teacher: {with_grad}/{len(list(model_clip.parameters()))} parameter tensors hold a .grad")
