"""VAC_CSLR's Optimizer wrapper builds the optimizer named in the config: its Adam branch passes model.parameters(), but its SGD branch passes the model itself, optim.SGD(model, ...), so a run configured with `optimizer: SGD` fails when the optimizer is built (the maintainer confirmed it should be model.parameters()).

source: https://github.com/VIPL-SLP/VAC_CSLR/issues/42
kind: bug
symptom: crash
verified: TypeError: 'SLRModel' object is not iterable
"""
import torch
import torch.nn as nn
import torch.optim as optim

CONFIG = {
    "model_args": {"num_classes": 20, "hidden_size": 32},
    "optimizer_args": {"optimizer": "SGD", "base_lr": 0.01, "step": [20, 35], "learning_ratio": 1,
                       "weight_decay": 0.0001, "start_epoch": 0, "nesterov": False},
}


class Optimizer(object):
    def __init__(self, model, optim_dict):
        self.optim_dict = optim_dict
        if self.optim_dict["optimizer"] == 'SGD':
            self.optimizer = optim.SGD(  # ROOT
                model,
                lr=self.optim_dict['base_lr'],
                momentum=0.9,
                nesterov=self.optim_dict['nesterov'],
                weight_decay=self.optim_dict['weight_decay']
            )
        elif self.optim_dict["optimizer"] == 'Adam':
            self.optimizer = optim.Adam(
                model.parameters(),
                lr=self.optim_dict['base_lr'],
                weight_decay=self.optim_dict['weight_decay']
            )
        else:
            raise ValueError()
        self.scheduler = self.define_lr_scheduler(self.optimizer, self.optim_dict['step'])

    def define_lr_scheduler(self, optimizer, milestones):
        return optim.lr_scheduler.MultiStepLR(optimizer, milestones=milestones, gamma=0.2)

    def zero_grad(self):
        self.optimizer.zero_grad()

    def step(self):
        self.optimizer.step()


class SLRModel(nn.Module):
    def __init__(self, num_classes, hidden_size=32):
        super().__init__()
        self.conv1d = nn.Conv1d(12, hidden_size, kernel_size=5, padding=2)
        self.temporal_model = nn.LSTM(hidden_size, hidden_size, batch_first=True, bidirectional=True)
        self.classifier = nn.Linear(2 * hidden_size, num_classes)

    def forward(self, x):
        x = torch.relu(self.conv1d(x.transpose(1, 2))).transpose(1, 2)
        x, _ = self.temporal_model(x)
        return self.classifier(x).log_softmax(-1)


class Processor:
    def __init__(self, arg):
        self.arg = arg
        self.model = SLRModel(**arg["model_args"])
        self.optimizer = Optimizer(self.model, arg["optimizer_args"])
        self.loss = nn.CTCLoss(reduction="mean", zero_infinity=True)

    def train_epoch(self, n_batches=3):
        self.model.train()
        for _ in range(n_batches):
            vid = torch.randn(2, 30, 12)
            label = torch.randint(1, self.arg["model_args"]["num_classes"], (2, 6))
            log_probs = self.model(vid).transpose(0, 1)
            loss = self.loss(log_probs, label, torch.full((2,), 30), torch.full((2,), 6))
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        self.optimizer.scheduler.step()
        return loss.item()


torch.manual_seed(0)
processor = Processor(CONFIG)
for epoch in range(2):
    print(epoch, processor.train_epoch())
