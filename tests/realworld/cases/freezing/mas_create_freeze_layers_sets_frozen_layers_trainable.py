"""MAS-PyTorch create_freeze_layers: all conv layers are first frozen, then the loop over the layers it lists as freeze_layers sets their parameters to requires_grad = True, so the "frozen" early convs train and the last convs meant to adapt stay frozen.

source: https://github.com/wannabeOG/MAS-PyTorch/issues/1
kind: bug
symptom: silent
verified: features.0 (listed in freeze_layers) changes after training while features.6 (meant to train) is unchanged
"""
import torch
import torch.nn as nn


class AlexNetLike(nn.Module):
    def __init__(self, num_classes=4):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
                                      nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(8 * 4 * 4, num_classes))

    def forward(self, x):
        return self.classifier(self.features(x))


def create_freeze_layers(model, no_of_layers=2):
    for param in model.classifier.parameters():
        param.requires_grad = True
    for param in model.features.parameters():
        param.requires_grad = False
    if no_of_layers == 0:
        return []
    temp_list = []
    freeze_layers = []
    for key in model.features._modules:
        if type(model.features._modules[key]) == torch.nn.modules.conv.Conv2d:
            temp_list.append(key)
    num_of_frozen_layers = len(temp_list) - no_of_layers
    for num in range(0, num_of_frozen_layers):
        string_name = temp_list[num]
        for param in model.features._modules[string_name].parameters():
            param.requires_grad = True  # ROOT
        freeze_layers.append('features.' + temp_list[num] + '.weight')
        freeze_layers.append('features.' + temp_list[num] + '.bias')
    return [model, freeze_layers]


torch.manual_seed(0)
model = AlexNetLike()
model, freeze_layers = create_freeze_layers(model, no_of_layers=2)
optimizer = torch.optim.SGD(filter(lambda p: p.requires_grad, model.parameters()), lr=0.01, momentum=0.9)
first_before, last_before = model.features[0].weight.clone(), model.features[6].weight.clone()
for step in range(3):
    x, y = torch.randn(4, 3, 4, 4), torch.randint(0, 4, (4,))
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(freeze_layers[:2], not torch.equal(first_before, model.features[0].weight), torch.equal(last_before, model.features[6].weight))
