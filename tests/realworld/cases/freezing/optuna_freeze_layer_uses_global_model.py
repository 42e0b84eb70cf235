"""freeze_layer walks a global model left over from an earlier cell, not the model it was given.

source: https://github.com/optuna/optuna/issues/3855
kind: bug
symptom: silent
verified: every parameter of the trial's model still has requires_grad True and changes
"""
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = nn.Conv2d(3, 4, 3, padding=1)
        self.layer2 = nn.Conv2d(4, 4, 3, padding=1)
        self.fc = nn.Linear(4, 10)

    def forward(self, x):
        x = torch.relu(self.layer2(torch.relu(self.layer1(x))))
        return self.fc(x.mean((2, 3)))


def freeze_layer(model, layer_instance, layer_name, layer_numbers, freeze=True):
    for name, layer in model_ft.named_modules():  # ROOT
        for layer_number in layer_numbers:
            layer_id = '%s%d' % (layer_name, layer_number)
            if isinstance(layer, layer_instance) and name.startswith(layer_id):
                for param in layer.parameters():
                    param.requires_grad_(not freeze)
    return model


def objective(layers_to_freeze):
    torch.manual_seed(0)
    base_model = Net()
    model = freeze_layer(base_model, nn.Conv2d, 'layer', layers_to_freeze, True)
    before = model.layer1.weight.detach().clone()
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    x, y = torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,))
    for _ in range(2):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return model.layer1.weight.requires_grad, torch.equal(before, model.layer1.weight.detach())


model_ft = Net()
print(objective([1, 2]))
