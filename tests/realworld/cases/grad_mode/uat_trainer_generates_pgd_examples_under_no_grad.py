"""An adversarial-training trainer generates its PGD examples inside `with torch.no_grad():` (meant as a speed-up, since the examples are inputs, not weights); the attack sets `requires_grad` on its perturbed images and asks `torch.autograd.grad` for the input gradient, but the model's forward inside the trainer's no-grad block records no graph, so the attack fails on the first batch.

source: https://github.com/martinez-hub/underconfidence-adversarial-training/commit/5033ed812acce8e7125977bbaa35e82c89307429
kind: bug
symptom: crash
verified: RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


class PGDAttack:
    def __init__(self, model, epsilon=8 / 255, alpha=2 / 255, num_steps=5):
        self.model = model
        self.epsilon = epsilon
        self.alpha = alpha
        self.num_steps = num_steps

    def generate(self, x, y):
        x_adv = x + torch.empty_like(x).uniform_(-self.epsilon, self.epsilon)
        x_adv = torch.clamp(x_adv, 0, 1)
        for _ in range(self.num_steps):
            x_adv.requires_grad = True
            loss = F.cross_entropy(self.model(x_adv), y)
            grad = torch.autograd.grad(loss, x_adv)[0]
            with torch.no_grad():
                x_adv = x_adv + self.alpha * grad.sign()
                x_adv = torch.min(torch.max(x_adv, x - self.epsilon), x + self.epsilon).clamp(0, 1)
        return x_adv.detach()


class Trainer:
    def __init__(self, model, attack, lr=0.05):
        self.model = model
        self.attack = attack
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)

    def train_epoch(self, batches):
        self.model.train()
        for x, y in batches:
            with torch.no_grad():  # ROOT
                self.model.eval()
                x_train = self.attack.generate(x, y)
                self.model.train()
            self.optimizer.zero_grad()
            loss = F.cross_entropy(self.model(x_train), y)
            loss.backward()
            self.optimizer.step()
            print(f"adversarial loss {loss.item():.4f}")


model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                      nn.Flatten(), nn.Linear(8, 10))
trainer = Trainer(model, PGDAttack(model))
batches = [(torch.rand(8, 3, 16, 16), torch.randint(0, 10, (8,))) for _ in range(3)]
trainer.train_epoch(batches)
