"""Hidden layers appended to self.hids (a list of [Linear, activation] pairs) are not in parameters.

source: https://github.com/pytorch/pytorch/issues/715
kind: bug
symptom: silent
verified: model.hids[0][0].weight never changes; only classifier is listed
"""
import torch
import torch.nn as nn

options = {'n_layers': 2, 'n_hid': 8, 'act': 'Tanh'}


class SNLINet(nn.Module):
    def __init__(self, options):
        super(SNLINet, self).__init__()
        self.hids = []  # ROOT
        for li in range(options['n_layers']):
            self.hids.append([
                nn.Linear(options['n_hid'], options['n_hid']),
                getattr(nn, options['act'])(),
            ])
        self.classifier = nn.Linear(options['n_hid'], 3)

    def forward(self, x):
        for lin, act in self.hids:
            x = act(lin(x))
        return self.classifier(x)


torch.manual_seed(0)
model = SNLINet(options)
print(model)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
x = torch.randn(32, 8)
y = torch.randint(0, 3, (32,))
for epoch in range(10):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
