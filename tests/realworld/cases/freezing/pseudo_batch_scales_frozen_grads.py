"""The pseudo-batch loop divides every parameter's gradient, and crashes on a frozen layer whose grad is None.

source: https://github.com/MichiganCOG/ViP/issues/7
kind: bug
symptom: crash
verified: AttributeError: 'NoneType' object has no attribute 'data'
"""
import torch
import torch.nn as nn


class C3D(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv3d(3, 4, 3, padding=1)
        self.fc8 = nn.Linear(4, 5)

    def forward(self, x):
        return self.fc8(torch.relu(self.conv1(x)).mean((2, 3, 4)))


torch.manual_seed(0)
model = C3D()
for param in model.conv1.parameters():
    param.requires_grad = False
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
pseudo_batch_loop = 2
batches = [(torch.randn(2, 3, 4, 8, 8), torch.randint(0, 5, (2,))) for _ in range(2)]
for step, (x_input, y_label) in enumerate(batches):
    loss = nn.functional.cross_entropy(model(x_input), y_label)
    loss.backward()
    if (step + 1) % pseudo_batch_loop == 0:
        for param in model.parameters():
            param.grad.data /= pseudo_batch_loop  # ROOT
        optimizer.step()
        optimizer.zero_grad()
