import torch
from learner import Callback


class GradientClip(Callback):
    order = 10

    def __init__(self, max_norm=1.0):
        self.max_norm = max_norm

    def after_backward(self):
        torch.nn.utils.clip_grad_norm_(self.learn.model.parameters(), self.max_norm)


class ResetGrads(Callback):
    order = 20

    def after_backward(self):
        self.learn.opt.zero_grad()  # ROOT
