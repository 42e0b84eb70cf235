"""Multispectral YOLOv5 with the fix the issue asks for: the transformer fusion block's pos_emb Parameter is appended to pg1, so every trainable parameter is in one of the optimizer's groups.

source: https://github.com/DocF/multispectral-object-detection/issues/77
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class GPT(nn.Module):
    def __init__(self, d_model, vert_anchors=4, horz_anchors=4, n_layer=1):
        super().__init__()
        self.n_embd = d_model
        self.vert_anchors, self.horz_anchors = vert_anchors, horz_anchors
        self.pos_emb = nn.Parameter(torch.zeros(1, 2 * vert_anchors * horz_anchors, self.n_embd))
        self.trans_blocks = nn.Sequential(*[nn.TransformerEncoderLayer(d_model, 2, 2 * d_model, 0.0, batch_first=True)
                                            for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(self.n_embd)
        self.avgpool = nn.AdaptiveAvgPool2d((vert_anchors, horz_anchors))

    def forward(self, x):
        rgb_fea, ir_fea = x[0], x[1]
        bs, c, h, w = rgb_fea.shape
        rgb_fea_flat = self.avgpool(rgb_fea).view(bs, c, -1)
        ir_fea_flat = self.avgpool(ir_fea).view(bs, c, -1)
        token_embeddings = torch.cat([rgb_fea_flat, ir_fea_flat], dim=2).permute(0, 2, 1)
        x = self.ln_f(self.trans_blocks(self.pos_emb + token_embeddings))
        x = x.view(bs, 2, self.vert_anchors, self.horz_anchors, self.n_embd).permute(0, 1, 4, 2, 3)
        rgb_out = F.interpolate(x[:, 0], size=([h, w]), mode='bilinear')
        ir_out = F.interpolate(x[:, 1], size=([h, w]), mode='bilinear')
        return rgb_fea + rgb_out, ir_fea + ir_out


class Model(nn.Module):
    def __init__(self, nc=3):
        super().__init__()
        self.rgb_stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.SiLU())
        self.ir_stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.SiLU())
        self.fusion = GPT(16)
        self.detect = nn.Conv2d(32, nc + 5, 1)

    def forward(self, rgb, ir):
        rgb_fea, ir_fea = self.fusion([self.rgb_stem(rgb), self.ir_stem(ir)])
        return self.detect(torch.cat([rgb_fea, ir_fea], 1))


torch.manual_seed(0)
hyp = {'lr0': 0.01, 'momentum': 0.937, 'weight_decay': 0.0005}
model = Model()
pg0, pg1, pg2 = [], [], []  # optimizer parameter groups
for k, v in model.named_modules():
    if hasattr(v, 'bias') and isinstance(v.bias, nn.Parameter):
        pg2.append(v.bias)  # biases
    if isinstance(v, nn.BatchNorm2d):
        pg0.append(v.weight)  # no decay
    elif hasattr(v, 'weight') and isinstance(v.weight, nn.Parameter):
        pg1.append(v.weight)  # apply decay
    if isinstance(v, GPT):
        pg1.append(v.pos_emb)  # positional embedding
    if isinstance(v, nn.MultiheadAttention):
        pg1.append(v.in_proj_weight)  # attention input projection (not a `.weight`)
        pg2.append(v.in_proj_bias)
optimizer = optim.SGD(pg0, lr=hyp['lr0'], momentum=hyp['momentum'], nesterov=True)
optimizer.add_param_group({'params': pg1, 'weight_decay': hyp['weight_decay']})
optimizer.add_param_group({'params': pg2})

before = model.fusion.pos_emb.detach().clone()
for ni in range(3):
    rgb, ir = torch.rand(2, 3, 32, 32), torch.rand(2, 3, 32, 32)
    pred = model(rgb, ir)
    loss = F.mse_loss(pred, torch.rand_like(pred))
    loss.backward()
    grad = model.fusion.pos_emb.grad.abs().max().item()
    optimizer.step()
    optimizer.zero_grad()
print(grad, (model.fusion.pos_emb - before).abs().max().item())
