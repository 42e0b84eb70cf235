"""continual-ssl-medical-segmentation's `finetune` distils a frozen teacher into the student segmentation network: the teacher's softened class probabilities are computed under `torch.inference_mode()` and fed as the target of a KL-divergence term added to the supervised loss. Tensors made in inference mode are not ordinary no-grad tensors: autograd refuses to save them, and `kl_div` must save its target to differentiate with respect to the student's log-probabilities, so the first batch that has a teacher crashes while the distillation loss is built.

source: https://github.com/Tesfay-Hagos/continual-ssl-medical-segmentation/commit/e21ddc183d337f3cdc88c24f6779b44670229a41
kind: bug
symptom: crash
verified: RuntimeError: Inference tensors cannot be saved for backward
"""
import copy

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

NUM_CLASSES = 3


class TinySegNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv3d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv3d(8, 8, 3, padding=1), nn.ReLU())
        self.head = nn.Conv3d(8, NUM_CLASSES, 1)

    def forward(self, x):
        return self.head(self.body(x))


def make_loader(n_batches=4, batch=2, size=8):
    for _ in range(n_batches):
        imgs = torch.randn(batch, 1, size, size, size)
        labels = (imgs[:, 0] > 0.5).long() + (imgs[:, 0] > 1.2).long()
        yield imgs, labels


def finetune(model, loader, teacher=None, alpha=0.5, t_kd=2.0, epochs=2):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(epochs):
        model.train()
        total = 0.0
        for imgs, labels in loader():
            preds = model(imgs)
            loss = criterion(preds, labels)
            if teacher is not None:
                with torch.inference_mode():  # ROOT
                    t_soft = F.softmax(teacher(imgs).float() / t_kd, dim=1)
                s_log = F.log_softmax(preds.float() / t_kd, dim=1)
                n_voxels = imgs.shape[2] * imgs.shape[3] * imgs.shape[4]
                kd_loss = F.kl_div(s_log, t_soft, reduction="sum") / (imgs.shape[0] * n_voxels)
                loss = loss + alpha * kd_loss * (t_kd ** 2)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
        print(f"epoch {epoch}: loss {total:.4f}")
    return model


teacher = TinySegNet()
finetune(teacher, make_loader)  # the previous task's model becomes the teacher
student = copy.deepcopy(teacher)
teacher.eval()
teacher.requires_grad_(False)
finetune(student, make_loader, teacher=teacher)
