"""A model inherits get_optimizer_parameters from its base and its newly added layer is never registered.

source: https://github.com/facebookresearch/mmf/issues/104
kind: bug
symptom: silent
verified: model.extra_fc.weight receives gradients but never changes
"""
import torch
import torch.nn as nn


class BaseModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.text_encoder = nn.Linear(8, 8)
        self.classifier = nn.Linear(8, 3)

    def get_optimizer_parameters(self, config):
        return [{"params": self.text_encoder.parameters()},  # ROOT
                {"params": self.classifier.parameters()}]

    def forward(self, x):
        return self.classifier(torch.relu(self.text_encoder(x)))


class MyModel(BaseModel):
    def __init__(self):
        super().__init__()
        self.extra_fc = nn.Linear(8, 8)

    def forward(self, x):
        return self.classifier(torch.relu(self.extra_fc(torch.relu(self.text_encoder(x)))))


def build_optimizer(model, config):
    if hasattr(model, "get_optimizer_parameters"):
        parameters = model.get_optimizer_parameters(config)
    else:
        parameters = model.parameters()
    return torch.optim.Adam(parameters, lr=config["lr"])


torch.manual_seed(0)
config = {"lr": 1e-2}
model = MyModel()
optimizer = build_optimizer(model, config)
x, y = torch.randn(16, 8), torch.randint(0, 3, (16,))
for _ in range(5):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
