"""advertorch FGSM: perturb() returns xadv = clamp(xadv + eps * grad_sign), a non-leaf tensor, and the caller reads fgsm_tensor.grad after backpropagating a loss through the model on it; the gradient is never stored there.

source: https://github.com/BorealisAI/advertorch/issues/49
kind: bug
symptom: crash
verified: AttributeError: 'NoneType' object has no attribute 'clone'
"""
import torch
import torch.nn as nn


def replicate_input(x):
    return x.detach().clone()


def clamp(input, min=None, max=None):
    return torch.clamp(input, min=min, max=max)


class GradientSignAttack(object):
    def __init__(self, predict, loss_fn=None, eps=0.3, clip_min=0., clip_max=1., targeted=False):
        self.predict = predict
        self.loss_fn = loss_fn or nn.CrossEntropyLoss(reduction="sum")
        self.eps = eps
        self.clip_min = clip_min
        self.clip_max = clip_max
        self.targeted = targeted

    def perturb(self, x, y=None):
        x, y = replicate_input(x), y
        xadv = x.requires_grad_()
        outputs = self.predict(xadv)
        loss = self.loss_fn(outputs, y)
        if self.targeted:
            loss = -loss
        loss.backward()
        grad_sign = xadv.grad.detach().sign()
        xadv = xadv + self.eps * grad_sign
        xadv = clamp(xadv, self.clip_min, self.clip_max)
        return xadv


torch.manual_seed(0)
model = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 10))
adversary = GradientSignAttack(model, eps=0.3)
cln_data, true_label = torch.rand(4, 1, 28, 28), torch.randint(0, 10, (4,))
fgsm_tensor = adversary.perturb(cln_data, true_label)  # ROOT
loss = nn.functional.cross_entropy(model(fgsm_tensor), true_label)
loss.backward()
fgsm_grad = fgsm_tensor.grad.clone()  # SYMPTOM
