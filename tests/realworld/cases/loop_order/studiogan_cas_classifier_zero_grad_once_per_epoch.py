"""PyTorch-StudioGAN's classifier-accuracy-score training (`WORKER.train_classifier`, reduced) calls `optimizer.zero_grad()` once per epoch, before the batch loop, and never inside it: every batch's `ce_loss.backward()` adds to the gradients of all earlier batches of the epoch, so each SGD step uses the running sum of the epoch's gradients, with no error.

source: https://github.com/POSTECH-CVLab/PyTorch-StudioGAN/commit/343107e546cd14fcea6794ca7fd3f81e063d03d2
kind: bug
symptom: silent
verified: in the last epoch the gradient at the last batch is 59.4 times the size of the first batch's (the look-alike: 0.7 times) and the classifier ends at 0.346 validation accuracy against 0.955 for the look-alike
"""
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

NUM_CLASSES = 10


def make_split(n):
    labels = torch.randint(0, NUM_CLASSES, (n,))
    prototypes = torch.linspace(-1, 1, NUM_CLASSES).view(-1, 1, 1, 1)
    images = prototypes[labels] + 0.6 * torch.randn(n, 3, 8, 8)
    images[:, 0] *= (labels.view(-1, 1, 1) % 3 + 1).float() / 2
    return images, labels


class ResNetStandIn(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(2), nn.Flatten())
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        return self.fc(self.features(x))


def adjust_learning_rate(optimizer, lr_org, epoch, total_epoch):
    lr = lr_org * (0.1 ** (epoch // (total_epoch // 2)))
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr


@torch.no_grad()
def validate_classifier(model, images, labels):
    model.eval()
    return (model(images).argmax(1) == labels).float().mean().item()


def train_classifier(train_set, valid_set, cas_setting):
    model = ResNetStandIn(NUM_CLASSES)
    optimizer = torch.optim.SGD(params=model.parameters(), lr=cas_setting["lr"], momentum=cas_setting["momentum"],
                                weight_decay=cas_setting["weight_decay"], nesterov=True)
    images_all, labels_all = train_set
    grad_ratio = []
    for current_epoch in range(cas_setting["epochs"]):
        model.train()
        optimizer.zero_grad()  # ROOT
        adjust_learning_rate(optimizer, cas_setting["lr"], current_epoch, cas_setting["epochs"])
        order = torch.randperm(len(labels_all))
        norms = []
        for i, idx in enumerate(order.split(64)):
            images, labels = images_all[idx], labels_all[idx]
            logits = model(images)
            ce_loss = F.cross_entropy(logits, labels)
            ce_loss.backward()
            norms.append(model.fc.weight.grad.norm().item())
            optimizer.step()
        grad_ratio.append(norms[-1] / norms[0])
        valid_acc = validate_classifier(model, *valid_set)
    return valid_acc, grad_ratio


cas_setting = {"epochs": 6, "lr": 0.05, "momentum": 0.9, "weight_decay": 5e-4}
valid_acc, grad_ratio = train_classifier(make_split(2048), make_split(512), cas_setting)
print(f"last batch / first batch gradient norm in the last epoch: {grad_ratio[-1]:.1f}")
print(f"validation accuracy: {valid_acc:.3f}")
