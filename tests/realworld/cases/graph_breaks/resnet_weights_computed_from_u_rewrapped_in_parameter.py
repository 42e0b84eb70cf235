"""Network weights w = g(u) = sin(u) / ||u||, optimized through u: the layers' weights are set to nn.Parameter(w), which starts a new leaf and ignores the history of w, so u never receives a gradient and never changes.

source: https://discuss.pytorch.org/t/what-is-the-most-convenient-way-to-make-model-weights-dependent-on-some-parameter/47645
kind: bug
symptom: silent
verified: after backward u.grad is None and u is unchanged by the optimizer; only the rewrapped layer weights get gradients
"""
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, u):
        super().__init__()
        self.u = u
        self.fc1 = nn.Linear(8, 8)
        self.fc2 = nn.Linear(8, 2)
        self.set_weights()

    def set_weights(self):
        w = torch.sin(self.u) / torch.norm(self.u)
        self.fc1.weight = nn.Parameter(w)  # ROOT

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


torch.manual_seed(0)
u = torch.randn(8, 8, requires_grad=True)
model = Net(u)
optimizer = torch.optim.SGD([u], lr=0.1)
u_before = u.detach().clone()
for it in range(3):
    x, y = torch.randn(16, 8), torch.randint(0, 2, (16,))
    model.set_weights()
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(u.grad, torch.equal(u, u_before))
