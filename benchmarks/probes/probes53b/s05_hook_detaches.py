import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
features = {}


def save_features(module, inputs, output):
    features["last"] = output
    return output.detach()  # ROOT


model[2].register_forward_hook(save_features)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(5, 4), torch.randint(0, 2, (5,))
loss = nn.functional.cross_entropy(model(x), y)
opt.zero_grad()
loss.backward()
opt.step()
