"""Lightning's computer_vision_fine_tuning example: torch.sigmoid gives y_scores for the accuracy, while the loss is binary_cross_entropy_with_logits on the raw y_logits.

source: https://github.com/Lightning-AI/pytorch-lightning/issues/18272
kind: lookalike
verified: the training loss equals binary_cross_entropy_with_logits(y_logits, y_true) and is 0.76 on the first batch; y_scores only feed the accuracy
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class TransferLearningModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.feature_extractor = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
        self.loss_func = F.binary_cross_entropy_with_logits

    def forward(self, x):
        return self.fc(self.feature_extractor(x))

    def loss(self, logits, labels):
        return self.loss_func(input=logits, target=labels)

    def training_step(self, batch):
        x, y = batch
        y_logits = self.forward(x)
        y_scores = torch.sigmoid(y_logits)
        y_true = y.view((-1, 1)).type_as(x)
        train_loss = self.loss(y_logits, y_true)
        train_acc = ((y_scores > 0.5).float() == y_true).float().mean()
        return train_loss, train_acc


torch.manual_seed(0)
model = TransferLearningModel()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(3):
    batch = (torch.randn(4, 3, 8, 8), torch.randint(0, 2, (4,)))
    loss, acc = model.training_step(batch)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(round(loss.item(), 2), acc.item())
