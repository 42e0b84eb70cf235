"""temperature_scaling's ModelWithTemperature.set_temperature tunes the temperature with LBFGS, but its closure eval() never calls optimizer.zero_grad(): LBFGS calls the closure many times per step and every loss.backward() adds to the temperature's grad, so the line search follows the running sum of old gradients and stops at a temperature that is not the NLL optimum.

source: https://github.com/gpleiss/temperature_scaling/issues/20
kind: bug
symptom: silent
verified: on 256 validation logits whose NLL is lowest at temperature 2.65 (grid search), LBFGS(lr=0.01, max_iter=50) ends at temperature 51108884.0 and NLL 2.303 (every prediction uniform, the NLL of 10 classes); with optimizer.zero_grad() at the top of eval() (the fix) it ends at temperature 1.702 and NLL 2.064, down from 2.489
"""
import torch
from torch import nn, optim


class ModelWithTemperature(nn.Module):
    def __init__(self, model):
        super(ModelWithTemperature, self).__init__()
        self.model = model
        self.temperature = nn.Parameter(torch.ones(1) * 1.5)

    def forward(self, input):
        logits = self.model(input)
        return self.temperature_scale(logits)

    def temperature_scale(self, logits):
        temperature = self.temperature.unsqueeze(1).expand(logits.size(0), logits.size(1))
        return logits / temperature

    def set_temperature(self, valid_loader):  # the ECE metric and the .cuda() calls are left out
        nll_criterion = nn.CrossEntropyLoss()

        logits_list = []
        labels_list = []
        with torch.no_grad():
            for input, label in valid_loader:
                logits = self.model(input)
                logits_list.append(logits)
                labels_list.append(label)
            logits = torch.cat(logits_list)
            labels = torch.cat(labels_list)

        before_temperature_nll = nll_criterion(logits, labels).item()
        print('Before temperature - NLL: %.3f' % before_temperature_nll)

        optimizer = optim.LBFGS([self.temperature], lr=0.01, max_iter=50)

        def eval():
            loss = nll_criterion(self.temperature_scale(logits), labels)
            loss.backward()  # ROOT
            return loss
        optimizer.step(eval)

        after_temperature_nll = nll_criterion(self.temperature_scale(logits), labels).item()
        print('Optimal temperature: %.3f' % self.temperature.item())
        print('After temperature - NLL: %.3f' % after_temperature_nll)
        return self


torch.manual_seed(0)
classifier = nn.Linear(20, 10)  # an over-confident trained classifier: large weights
with torch.no_grad():
    classifier.weight.mul_(4.0)
valid_loader = []
for _ in range(4):  # labels drawn from softmax(logits / 2.5): the calibrated temperature is about 2.5
    x = torch.randn(64, 20)
    with torch.no_grad():
        y = torch.multinomial(torch.softmax(classifier(x) / 2.5, dim=1), 1).squeeze(1)
    valid_loader.append((x, y))
scaled_model = ModelWithTemperature(classifier)
scaled_model.set_temperature(valid_loader)
with torch.no_grad():  # the NLL over a grid of temperatures, for reference
    logits = torch.cat([classifier(x) for x, _ in valid_loader])
    labels = torch.cat([y for _, y in valid_loader])
    grid = torch.linspace(0.5, 20, 391)
    nll = torch.stack([nn.functional.cross_entropy(logits / t, labels) for t in grid])
print('grid optimum: temperature %.3f NLL %.3f' % (grid[nll.argmin()].item(), nll.min().item()))
