"""NeuralRecon main.py: lr_scheduler.step() is called at the start of every epoch, before any optimizer.step() of that epoch, so the MultiStepLR schedule runs one epoch ahead and each decay starts an epoch before its milestone (PyTorch warns about the order).

source: https://github.com/zju3dv/NeuralRecon/issues/51
kind: bug
symptom: silent
verified: with LR 1e-3 and milestones 2,3 (gamma 1/2) the epochs train with lr 1e-3, 5e-4, 2.5e-4, 2.5e-4 instead of 1e-3, 1e-3, 5e-4, 2.5e-4, and torch warns that lr_scheduler.step() was called before optimizer.step()
"""
import torch
import torch.nn as nn


class CfgNode(dict):
    __getattr__ = dict.__getitem__


cfg = CfgNode(TRAIN=CfgNode(LR=1e-3, WD=0.0, EPOCHS=4, LREPOCHS='2,3:2'))


class NeuralRecon(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.backbone2d = nn.Conv2d(3, 8, 3, padding=1)
        self.tsdf_head = nn.Conv2d(8, 1, 1)

    def forward(self, sample):
        tsdf = torch.tanh(self.tsdf_head(torch.relu(self.backbone2d(sample['imgs']))))
        total_loss = (tsdf - sample['tsdf']).abs().mean()
        return tsdf, {'total_loss': total_loss}


model = NeuralRecon(cfg)
optimizer = torch.optim.Adam(model.parameters(), lr=cfg.TRAIN.LR, betas=(0.9, 0.999), weight_decay=cfg.TRAIN.WD)
TrainImgLoader = [{'imgs': torch.randn(2, 3, 8, 8), 'tsdf': torch.rand(2, 1, 8, 8) * 2 - 1} for _ in range(2)]
lrs = []


def train_sample(sample):
    model.train()
    optimizer.zero_grad()
    outputs, loss_dict = model(sample)
    loss = loss_dict['total_loss']
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss.item()


def train():
    start_epoch = 0
    milestones = [int(epoch_idx) for epoch_idx in cfg.TRAIN.LREPOCHS.split(':')[0].split(',')]
    lr_gamma = 1 / float(cfg.TRAIN.LREPOCHS.split(':')[1])
    lr_scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones, gamma=lr_gamma,
                                                        last_epoch=start_epoch - 1)
    for epoch_idx in range(start_epoch, cfg.TRAIN.EPOCHS):
        lr_scheduler.step()  # ROOT
        lrs.append(optimizer.param_groups[0]['lr'])
        for batch_idx, sample in enumerate(TrainImgLoader):
            loss = train_sample(sample)


torch.manual_seed(0)
train()
print(lrs)
