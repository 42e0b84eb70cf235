"""Robustness test loop runs the PGD attack with grad on and only the final evaluation under torch.no_grad().

source: https://github.com/BorealisAI/advertorch/issues/79
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class LinfPGDAttack:
    def __init__(self, predict, eps=0.3, nb_iter=3, eps_iter=0.1):
        self.predict = predict
        self.eps, self.nb_iter, self.eps_iter = eps, nb_iter, eps_iter

    def perturb(self, x, y):
        delta = torch.zeros_like(x)
        delta.requires_grad_()
        for ii in range(self.nb_iter):
            outputs = self.predict(x + delta)
            loss = F.cross_entropy(outputs, y)
            loss.backward()
            grad_sign = delta.grad.data.sign()
            delta.data = (delta.data + self.eps_iter * grad_sign).clamp(-self.eps, self.eps)
            delta.grad.data.zero_()
        return (x + delta).detach()


net = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 64), nn.ReLU(), nn.Linear(64, 10))
net.eval()
adversary = LinfPGDAttack(net)
testloader = [(torch.rand(8, 1, 28, 28), torch.randint(0, 10, (8,))) for _ in range(2)]
correct = 0
for batch_idx, (inputs, targets) in enumerate(testloader):
    adv_untargeted = adversary.perturb(inputs, targets)
    inputs = adv_untargeted
    with torch.no_grad():
        outputs = net(inputs)
    correct += (outputs.argmax(1) == targets).sum().item()
print(correct)
