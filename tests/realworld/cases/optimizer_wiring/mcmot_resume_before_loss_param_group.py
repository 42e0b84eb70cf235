"""MCMOT --resume: the checkpoint's optimizer has the ReID loss param group, but it is loaded before BaseTrainer adds it.

source: https://github.com/CaptainEven/MCMOT/issues/92
kind: bug
symptom: crash
verified: ValueError: loaded state dict has a different number of parameter groups
"""
import torch
import torch.nn as nn


class MotLoss(nn.Module):
    def __init__(self, emb_dim=8, nID=5):
        super().__init__()
        self.classifier = nn.Linear(emb_dim, nID)
        self.s_det, self.s_id = nn.Parameter(-1.85 * torch.ones(1)), nn.Parameter(-1.05 * torch.ones(1))

    def forward(self, outputs, batch):
        det_loss = nn.functional.mse_loss(outputs[:, :1], batch["hm"])
        id_loss = nn.functional.cross_entropy(self.classifier(outputs[:, 1:]), batch["ids"])
        return torch.exp(-self.s_det) * det_loss + torch.exp(-self.s_id) * id_loss + self.s_det + self.s_id


class BaseTrainer(object):
    def __init__(self, model, optimizer=None):
        self.optimizer = optimizer
        self.model, self.loss = model, MotLoss()
        self.optimizer.add_param_group({'params': self.loss.parameters()})

    def train(self, batch):
        loss = self.loss(self.model(batch["input"]), batch)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()


def load_model(model, checkpoint, optimizer=None, resume=False):
    model.load_state_dict(checkpoint['state_dict'])
    start_epoch = 0
    if optimizer is not None and resume:
        optimizer.load_state_dict(checkpoint['optimizer'])
        start_epoch = checkpoint['epoch']
    return model, optimizer, start_epoch


def main(checkpoint=None):
    torch.manual_seed(0)
    model = nn.Linear(6, 9)
    optimizer = torch.optim.Adam(model.parameters(), 1e-4)
    start_epoch = 0
    if checkpoint is not None:
        model, optimizer, start_epoch = load_model(model, checkpoint, optimizer, resume=True)  # ROOT
    trainer = BaseTrainer(model, optimizer)
    batch = {"input": torch.randn(4, 6), "hm": torch.rand(4, 1), "ids": torch.randint(0, 5, (4,))}
    trainer.train(batch)
    return {'epoch': start_epoch + 1, 'state_dict': model.state_dict(), 'optimizer': optimizer.state_dict()}


checkpoint = main()
main(checkpoint)
