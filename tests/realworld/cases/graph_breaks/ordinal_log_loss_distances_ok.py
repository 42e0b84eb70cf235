"""Ordinal log loss: the distance weights come from label.item() in list comprehensions.

source: https://github.com/glanceable-io/ordinal-log-loss/issues/2
kind: lookalike
verified: the classifier's weights get a gradient and the loss goes down
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
num_classes = 4
dist_matrix = [[abs(i - j) for j in range(num_classes)] for i in range(num_classes)]


def compute_loss(model, inputs, labels):
    logits = model(inputs)
    probas = F.softmax(logits, dim=1)
    true_labels = [num_classes * [labels[k].item()] for k in range(len(labels))]
    label_ids = len(labels) * [[k for k in range(num_classes)]]
    distances = [[float(dist_matrix[true_labels[j][i]][label_ids[j][i]])
                  for i in range(num_classes)] for j in range(len(labels))]
    distances_tensor = torch.tensor(distances, requires_grad=True)
    err = -torch.log(1 - probas) * abs(distances_tensor) ** 2
    return torch.sum(err, axis=1).mean()


model = nn.Linear(6, num_classes)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
inputs, labels = torch.randn(16, 6), torch.randint(0, num_classes, (16,))
for step in range(3):
    optimizer.zero_grad()
    loss = compute_loss(model, inputs, labels)
    loss.backward()
    optimizer.step()
    print(loss.item())
