"""MAIR's `MART.calculate_cost` after its fix: the clean softmax used as the `nn.KLDivLoss` target is clamped (`torch.clamp(F.softmax(logits_clean, dim=1), min=1e-12)`), so when a confident classifier's clean probability underflows to 0 the clamp passes no gradient there instead of log(0), and the step leaves the weights finite.

source: https://github.com/Harry24k/MAIR/commit/fcf0abae1c901829e192d856b6b3992a7b16d90d
kind: lookalike
"""
import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)


class PGD:
    """L-inf PGD with a random start, as in torchattacks/MAIR."""

    def __init__(self, model, eps, alpha, steps, random_start=True):
        self.model, self.eps, self.alpha, self.steps, self.random_start = model, eps, alpha, steps, random_start

    def __call__(self, images, labels):
        adv = images.clone().detach()
        if self.random_start:
            adv = (adv + torch.empty_like(adv).uniform_(-self.eps, self.eps)).clamp(0, 1)
        for _ in range(self.steps):
            adv.requires_grad_(True)
            cost = F.cross_entropy(self.model(adv), labels)
            grad, = torch.autograd.grad(cost, adv)
            adv = adv.detach() + self.alpha * grad.sign()
            adv = (images + (adv - images).clamp(-self.eps, self.eps)).clamp(0, 1).detach()
        return adv


class MART:
    def __init__(self, rmodel, eps, alpha, steps, beta):
        self.rmodel = rmodel
        self.atk = PGD(rmodel, eps, alpha, steps)
        self.beta = beta

    def calculate_cost(self, images, labels):
        adv_images = self.atk(images, labels)
        logits_clean = self.rmodel(images)
        logits_adv = self.rmodel(adv_images)
        probs_adv = F.softmax(logits_adv, dim=1)
        tmp1 = torch.argsort(probs_adv, dim=1)[:, -2:]
        new_y = torch.where(tmp1[:, -1] == labels, tmp1[:, -2], tmp1[:, -1])
        loss_bce_adv = F.cross_entropy(logits_adv, labels, reduction="none") + F.nll_loss(
            torch.log(1.0001 - probs_adv + 1e-12), new_y, reduction="none")
        probs_clean = torch.clamp(F.softmax(logits_clean, dim=1), min=1e-12)
        log_prob_adv = torch.log(probs_adv + 1e-12)
        loss_kl = torch.sum(nn.KLDivLoss(reduction="none")(log_prob_adv, probs_clean), dim=1)
        true_probs = torch.gather(probs_clean, 1, labels.unsqueeze(1).long()).squeeze()
        loss_weighted_kl = loss_kl * (1.0000001 - true_probs)
        return (loss_bce_adv + self.beta * loss_weighted_kl).mean()


model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 64), nn.ReLU(), nn.Linear(64, 10))
with torch.no_grad():
    model[3].weight.mul_(300.0)  # a confident classifier, as late in adversarial training: clean logit gaps > 100
trainer = MART(model, eps=8 / 255, alpha=2 / 255, steps=3, beta=6.0)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
images = torch.rand(32, 3, 8, 8)
labels = torch.randint(0, 10, (32,))

model.train()
cost = trainer.calculate_cost(images, labels)
optimizer.zero_grad()
cost.backward()
optimizer.step()
finite_weights = all(torch.isfinite(p).all().item() for p in model.parameters())
print(f"loss {cost.item():.3f} finite: {torch.isfinite(cost).item()}, weights finite after step: {finite_weights}")
