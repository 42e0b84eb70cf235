"""DeiT after "Fix no-weight-decay in optimizer" (#52): `create_optimizer(args, model_without_ddp)` is given the unwrapped ViT, so timm finds its `no_weight_decay()` and `pos_embed` and `cls_token` go to the weight_decay 0.0 group while the DDP-wrapped model trains.

source: https://github.com/facebookresearch/deit/commit/1f961b060ad268158b5a3230c7ff8affa8ca0ba5
kind: lookalike
"""
import os
import tempfile

import torch
import torch.distributed as dist
from torch import nn

torch.manual_seed(0)


def add_weight_decay(model, weight_decay=1e-5, skip_list=()):
    decay = []
    no_decay = []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue  # frozen weights
        if len(param.shape) == 1 or name.endswith(".bias") or name in skip_list:
            no_decay.append(param)
        else:
            decay.append(param)
    return [
        {'params': no_decay, 'weight_decay': 0.},
        {'params': decay, 'weight_decay': weight_decay}]


def create_optimizer(args, model, filter_bias_and_bn=True):
    """timm's `create_optimizer` (0.3.x), reduced to AdamW."""
    weight_decay = args['weight_decay']
    if weight_decay and filter_bias_and_bn:
        skip = {}
        if hasattr(model, 'no_weight_decay'):
            skip = model.no_weight_decay()
        parameters = add_weight_decay(model, weight_decay, skip)
        weight_decay = 0.
    else:
        parameters = model.parameters()
    return torch.optim.AdamW(parameters, lr=args['lr'], weight_decay=weight_decay)


class TinyViT(nn.Module):
    def __init__(self, img_size=16, patch=4, dim=32, num_classes=10):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, patch, stride=patch)
        num_patches = (img_size // patch) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, num_patches + 1, dim) * 0.02)
        self.blocks = nn.TransformerEncoder(nn.TransformerEncoderLayer(dim, 4, 64, batch_first=True), 2)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def no_weight_decay(self):
        return {'pos_embed', 'cls_token'}

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1) + self.pos_embed
        return self.head(self.norm(self.blocks(x))[:, 0])


tmp = tempfile.mkdtemp()
dist.init_process_group("gloo", init_method=f"file://{os.path.join(tmp, 'init')}", rank=0, world_size=1)
args = {'lr': 5e-4, 'weight_decay': 0.05, 'distributed': True}

model = TinyViT()
model_without_ddp = model
if args['distributed']:
    model = torch.nn.parallel.DistributedDataParallel(model)
    model_without_ddp = model.module
optimizer = create_optimizer(args, model_without_ddp)

names = {id(p): n for n, p in model_without_ddp.named_parameters()}
decayed = sorted(names[id(p)] for g in optimizer.param_groups if g['weight_decay'] > 0 for p in g['params']
                 if names[id(p)] in model_without_ddp.no_weight_decay())
criterion = nn.CrossEntropyLoss()
for step in range(3):
    images, labels = torch.randn(16, 3, 16, 16), torch.randint(0, 10, (16,))
    loss = criterion(model(images), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}")
print("exempt parameters in a weight-decayed group (decayed):", decayed)
dist.destroy_process_group()
