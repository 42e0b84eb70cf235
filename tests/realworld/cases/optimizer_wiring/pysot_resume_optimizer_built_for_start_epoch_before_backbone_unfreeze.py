"""pysot train.py: the optimizer is built with build_opt_lr(model, cfg.TRAIN.START_EPOCH) before resuming, when START_EPOCH is still 0 and the backbone layers are not trainable yet; checkpoint_e10 was saved after the backbone was unfrozen at epoch 10, so its optimizer state has more parameters per group.

source: https://github.com/STVIR/pysot/issues/92
kind: bug
symptom: crash
verified: loaded state dict contains a parameter group that doesn't match the size of optimizer's group
"""
import io

import torch
import torch.nn as nn


class cfg:
    class BACKBONE:
        TRAIN_EPOCH = 10
        TRAIN_LAYERS = ['layer3']
        LAYERS_LR = 0.1

    class TRAIN:
        START_EPOCH = 0
        BASE_LR = 0.005
        RESUME = True


class ModelBuilder(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.ModuleDict({'layer1': nn.Linear(8, 8), 'layer3': nn.Linear(8, 8)})
        self.rpn_head = nn.Linear(8, 4)


def build_opt_lr(model, current_epoch=0):
    for param in model.backbone.parameters():
        param.requires_grad = False
    if current_epoch >= cfg.BACKBONE.TRAIN_EPOCH:
        for layer in cfg.BACKBONE.TRAIN_LAYERS:
            for param in model.backbone[layer].parameters():
                param.requires_grad = True
    trainable_params = [{'params': filter(lambda x: x.requires_grad, model.backbone.parameters()),
                         'lr': cfg.BACKBONE.LAYERS_LR * cfg.TRAIN.BASE_LR},
                        {'params': model.rpn_head.parameters(), 'lr': cfg.TRAIN.BASE_LR}]
    return torch.optim.SGD(trainable_params, momentum=0.9, weight_decay=1e-4)


def save_checkpoint_e10():
    model = ModelBuilder()
    optimizer = build_opt_lr(model, 10)
    loss = model.rpn_head(model.backbone['layer3'](model.backbone['layer1'](torch.randn(2, 8)))).sum()
    loss.backward()
    optimizer.step()
    buf = io.BytesIO()
    torch.save({'epoch': 10, 'state_dict': model.state_dict(), 'optimizer': optimizer.state_dict()}, buf)
    buf.seek(0)
    return buf


def restore_from(model, optimizer, ckpt_file):
    ckpt = torch.load(ckpt_file)
    epoch = ckpt['epoch']
    model.load_state_dict(ckpt['state_dict'])
    optimizer.load_state_dict(ckpt['optimizer'])  # SYMPTOM
    return model, optimizer, epoch


checkpoint_e10 = save_checkpoint_e10()
model = ModelBuilder()
optimizer = build_opt_lr(model, cfg.TRAIN.START_EPOCH)  # ROOT
if cfg.TRAIN.RESUME:
    model, optimizer, cfg.TRAIN.START_EPOCH = restore_from(model, optimizer, checkpoint_e10)
