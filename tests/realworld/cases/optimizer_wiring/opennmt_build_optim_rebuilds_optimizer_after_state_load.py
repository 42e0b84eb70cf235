"""OpenNMT-py build_optim: when resuming (train_from) the checkpoint's Adam state is loaded, then optim.set_parameters(model.named_parameters()) always constructs a fresh torch optimizer, erasing the loaded moments.

source: https://github.com/OpenNMT/OpenNMT-py/issues/617
kind: bug
symptom: silent
verified: after build_optim on a checkpoint, optim.optimizer.state is empty (exp_avg / step of the saved run are gone)
"""
import argparse
import copy

import torch
import torch.nn as nn
import torch.optim as optim


class Optim(object):
    def __init__(self, method, lr, max_grad_norm, beta1=0.9, beta2=0.999):
        self.method = method
        self.lr = lr
        self.max_grad_norm = max_grad_norm
        self.betas = (beta1, beta2)
        self._step = 0

    def set_parameters(self, params):
        self.params = []
        for k, p in params:
            if p.requires_grad:
                self.params.append(p)
        if self.method == 'sgd':
            self.optimizer = optim.SGD(self.params, lr=self.lr)
        elif self.method == 'adam':
            self.optimizer = optim.Adam(self.params, lr=self.lr, betas=self.betas, eps=1e-9)

    def step(self):
        self._step += 1
        if self.max_grad_norm:
            nn.utils.clip_grad_norm_(self.params, self.max_grad_norm)
        self.optimizer.step()


def build_optim(model, checkpoint, opt):
    if opt.train_from:
        print('Loading optimizer from checkpoint.')
        optim = checkpoint['optim']
        optim.optimizer.load_state_dict(checkpoint['optim'].optimizer.state_dict())
    else:
        print('Making optimizer for training.')
        optim = Optim(opt.optim, opt.learning_rate, opt.max_grad_norm)
    optim.set_parameters(model.named_parameters())  # ROOT
    return optim


def train(model, optim, steps=2):
    for _ in range(steps):
        src, tgt = torch.randn(4, 8), torch.randint(0, 5, (4,))
        model.zero_grad()
        loss = nn.functional.cross_entropy(model(src), tgt)
        loss.backward()
        optim.step()


torch.manual_seed(0)
opt = argparse.Namespace(train_from='', optim='adam', learning_rate=1e-3, max_grad_norm=5)
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 5))
optim_ = build_optim(model, None, opt)
train(model, optim_)
checkpoint = {'model': copy.deepcopy(model.state_dict()), 'optim': optim_}

opt.train_from = 'demo_acc_50.pt'
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 5))
model.load_state_dict(checkpoint['model'])
optim_ = build_optim(model, checkpoint, opt)
print(len(optim_.optimizer.state))
train(model, optim_)
