"""MVTN train loop with the reporter's fix: total_loss += loss.item() adds a Python float, so no step's graph outlives its backward.

source: https://github.com/ajhamdi/MVTN/issues/2
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MVTN(nn.Module):
    def __init__(self, nb_views=4):
        super().__init__()
        self.nb_views = nb_views
        self.view_regressor = nn.Sequential(nn.Linear(24, 32), nn.ReLU(), nn.Linear(32, 2 * nb_views), nn.Tanh())

    def forward(self, points):
        return self.view_regressor(points.flatten(1)).view(-1, self.nb_views, 2)


class MVNetwork(nn.Module):
    def __init__(self, nb_views=4, num_classes=10):
        super().__init__()
        self.fc = nn.Linear(nb_views * 2 + 24, num_classes)

    def forward(self, points, views):
        return self.fc(torch.cat([points.flatten(1), views.flatten(1)], 1))


torch.manual_seed(0)
mvtn, mvnetwork = MVTN(), MVNetwork()
optimizer = torch.optim.AdamW(list(mvtn.parameters()) + list(mvnetwork.parameters()), lr=1e-3)
criterion = nn.CrossEntropyLoss()
total_loss = 0.0
n = 0
for i in range(6):
    points, targets = torch.randn(8, 8, 3), torch.randint(0, 10, (8,))
    azim_elev = mvtn(points)
    outputs = mvnetwork(points, azim_elev)
    loss = criterion(outputs, targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    total_loss += loss.item()
    n += 1
print(total_loss / n, type(total_loss).__name__, getattr(total_loss, 'grad_fn', None))
