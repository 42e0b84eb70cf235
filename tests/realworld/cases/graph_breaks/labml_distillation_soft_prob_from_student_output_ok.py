"""labml.ai's annotated distillation experiment after the fix (commit e0d4b65, issue 66) computes the student's temperature-adjusted log-probabilities from the student's own output, so the soft-targets KL term sends gradient to the small model next to the label loss, while the teacher's logits stay under torch.no_grad().

source: https://github.com/labmlai/annotated_deep_learning_paper_implementations/issues/66
kind: lookalike
"""
import torch
from torch import nn


class LargeModel(nn.Module):  # stands for the VGG-style teacher trained on CIFAR 10
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x):
        return self.net(x)


class SmallModel(nn.Module):  # stands for the small VGG-style student
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 16), nn.ReLU(), nn.Linear(16, 10))

    def forward(self, x):
        return self.net(x)


class Configs:  # CIFAR10Configs, labml's tracker and the BatchIndex left out
    kl_div_loss = nn.KLDivLoss(log_target=True)
    loss_func = nn.CrossEntropyLoss()
    temperature: float = 5.
    soft_targets_weight: float = 100.
    label_loss_weight: float = 0.5

    def __init__(self):
        self.large, self.model = LargeModel(), SmallModel()
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=2.5e-4)
        self.is_train = True

    def step(self, batch):
        self.model.train(self.is_train)
        self.large.eval()
        data, target = batch
        with torch.no_grad():
            large_logits = self.large(data)
        output = self.model(data)
        soft_targets = nn.functional.log_softmax(large_logits / self.temperature, dim=-1)
        soft_prob = nn.functional.log_softmax(output / self.temperature, dim=-1)
        soft_targets_loss = self.kl_div_loss(soft_prob, soft_targets)
        label_loss = self.loss_func(output, target)
        loss = self.soft_targets_weight * soft_targets_loss + self.label_loss_weight * label_loss
        if self.is_train:
            label_only = torch.autograd.grad(self.label_loss_weight * label_loss, list(self.model.parameters()),
                                             retain_graph=True)
            loss.backward()
            diff = sum((p.grad - g).norm() for p, g in zip(self.model.parameters(), label_only))
            print("soft-targets loss", round(soft_targets_loss.item(), 6), "requires grad", soft_targets_loss.requires_grad,
                  "gradient beyond the label loss", round(diff.item(), 6))
            self.optimizer.step()
            self.optimizer.zero_grad()


torch.manual_seed(0)
conf = Configs()
for i in range(3):
    conf.step((torch.randn(32, 3, 8, 8), torch.randint(0, 10, (32,))))
