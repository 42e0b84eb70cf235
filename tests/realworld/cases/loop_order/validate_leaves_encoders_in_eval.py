"""Validation every val_step puts the encoders in eval mode; training resumes without train_start().

source: https://github.com/fartashf/vsepp/issues/4
kind: bug
symptom: silent
verified: model.img_enc.training is False for the training steps after the first validation
"""
import torch
import torch.nn as nn


class VSE:
    def __init__(self):
        self.img_enc = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.BatchNorm1d(8))
        self.txt_enc = nn.Sequential(nn.Linear(6, 8), nn.Dropout(0.5))
        params = list(self.img_enc.parameters()) + list(self.txt_enc.parameters())
        self.optimizer = torch.optim.Adam(params, lr=2e-4)
        self.Eiters = 0

    def train_start(self):
        self.img_enc.train()
        self.txt_enc.train()

    def val_start(self):
        self.img_enc.eval()
        self.txt_enc.eval()

    def train_emb(self, images, captions):
        self.Eiters += 1
        img_emb, cap_emb = self.img_enc(images), self.txt_enc(captions)
        loss = (1 - nn.functional.cosine_similarity(img_emb, cap_emb)).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()


def validate(val_loader, model):
    model.val_start()
    with torch.no_grad():
        for images, captions in val_loader:
            model.img_enc(images), model.txt_enc(captions)


def train(train_loader, val_loader, model, val_step=2):
    model.train_start()
    for images, captions in train_loader:
        model.train_emb(images, captions)
        print(model.Eiters, model.img_enc.training)
        if model.Eiters % val_step == 0:
            validate(val_loader, model)  # ROOT


torch.manual_seed(0)
loader = [(torch.randn(4, 8), torch.randn(4, 6)) for _ in range(5)]
train(loader, loader[:1], VSE())
