"""LaplaceNet's main loop after commit 98e64a1 (issue 1): the `if epoch >= 10: train_semi(...)` block sits at the epoch level, next to the supervised-initialisation branch, so after the 10 supervised epochs every epoch trains on the labelled and pseudo-labelled data.

source: https://github.com/psellcam/LaplaceNet/issues/1
kind: lookalike
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
        self.fc = nn.Linear(16, 3)

    def forward(self, x):
        feats = self.features(x)
        return self.fc(feats), feats


def train_sup(train_loader, model, optimizer, epoch, global_step, args):
    model.train()
    for i, (images, target) in enumerate(train_loader):
        index = torch.randperm(images.size(0))
        lam = np.random.beta(args["alpha"], args["alpha"])
        optimizer.zero_grad()
        class_logit, _ = model(lam * images + (1 - lam) * images[index])
        loss = lam * F.cross_entropy(class_logit, target) + (1 - lam) * F.cross_entropy(class_logit, target[index])
        loss.backward()
        optimizer.step()
        global_step += 1
    return global_step


def train_semi(train_loader_l, train_loader_u, model, optimizer, epoch, global_step, args):
    model.train()
    args["semi_calls"] += 1
    for (x_l, y_l), (x_u, p_labels, p_weights) in zip(train_loader_l, train_loader_u):
        optimizer.zero_grad()
        logit_l, _ = model(x_l)
        logit_u, _ = model(x_u)
        loss = F.cross_entropy(logit_l, y_l) + (p_weights * F.cross_entropy(logit_u, p_labels, reduction="none")).mean()
        loss.backward()
        optimizer.step()
        global_step += 1
    return global_step


def laplacenet():
    torch.manual_seed(0)
    np.random.seed(0)
    args = {"alpha": 0.5, "epochs": 14, "semi_calls": 0}
    x_l, y_l, x_u = torch.randn(32, 8), torch.randint(0, 3, (32,)), torch.randn(96, 8)
    train_loader = train_loader_l = [(x_l[i:i + 16], y_l[i:i + 16]) for i in range(0, 32, 16)]
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), 0.1, momentum=0.9)
    global_step = 0
    for epoch in range(args["epochs"]):
        if epoch >= 10:  # label propagation on the extracted features (a nearest-class-mean stand-in)
            with torch.no_grad():
                probs = F.softmax(model(x_u)[0], dim=1)
            train_loader_u = [(x_u[i:i + 48], probs[i:i + 48].argmax(1), probs[i:i + 48].max(1).values) for i in range(0, 96, 48)]
        if epoch == 10:
            w_start = model.fc.weight.detach().clone()
        if epoch < 10:
            for i in range(10):
                global_step = train_sup(train_loader, model, optimizer, epoch, global_step, args)
        if epoch >= 10:
            global_step = train_semi(train_loader_l, train_loader_u, model, optimizer, epoch, global_step, args)
    print("train_semi calls:", args["semi_calls"])
    print("classifier weight moved over epochs 10-13:", round((model.fc.weight - w_start).norm().item(), 4))


if __name__ == '__main__':
    laplacenet()
