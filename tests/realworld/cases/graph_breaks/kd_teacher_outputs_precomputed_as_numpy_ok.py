"""Knowledge distillation: teacher outputs are precomputed as numpy arrays and turned back into tensors.

source: https://github.com/haitongli/knowledge-distillation-pytorch/issues/25
kind: lookalike
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def fetch_teacher_outputs(teacher_model, dataloader):
    teacher_model.eval()
    teacher_outputs = []
    for data_batch, labels_batch in dataloader:
        output_teacher_batch = teacher_model(data_batch).data.cpu().numpy()
        teacher_outputs.append(output_teacher_batch)
    return teacher_outputs


def loss_fn_kd(outputs, labels, teacher_outputs, alpha=0.9, T=4):
    kd = nn.KLDivLoss(reduction="batchmean")(F.log_softmax(outputs / T, dim=1),
                                             F.softmax(teacher_outputs / T, dim=1))
    return kd * (alpha * T * T) + F.cross_entropy(outputs, labels) * (1. - alpha)


def train_kd(model, teacher_outputs, optimizer, dataloader):
    model.train()
    for i, (train_batch, labels_batch) in enumerate(dataloader):
        output_batch = model(train_batch)
        output_teacher_batch = torch.from_numpy(teacher_outputs[i])
        loss = loss_fn_kd(output_batch, labels_batch, output_teacher_batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


torch.manual_seed(0)
teacher_model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 4))
model = nn.Linear(10, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
dataloader = [(torch.randn(8, 10), torch.randint(0, 4, (8,))) for _ in range(3)]
teacher_outputs = fetch_teacher_outputs(teacher_model, dataloader)
assert isinstance(teacher_outputs[0], np.ndarray)
for epoch in range(2):
    train_kd(model, teacher_outputs, optimizer, dataloader)
