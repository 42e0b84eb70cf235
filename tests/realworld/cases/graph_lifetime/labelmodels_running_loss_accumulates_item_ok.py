"""labelmodels LabelModel._do_estimate_label_model after the fix: the epoch's running loss is accumulated with loss.item(), a Python float, so no iteration's graph outlives its backward.

source: https://github.com/BatsResearch/labelmodels/issues/4
kind: lookalike
verified: running_loss is a float after the epoch and no loss tensor is kept; the model's parameters change every step
"""
import torch
import torch.nn as nn


class NaiveBayes(nn.Module):
    def __init__(self, num_classes=3, num_lfs=5):
        super().__init__()
        self.class_balance = nn.Parameter(torch.zeros(num_classes))
        self.accuracy = nn.Parameter(torch.full((num_lfs,), 0.7))

    def forward(self, votes):
        agree = (votes > 0).float() * self.accuracy
        return -(torch.log_softmax(self.class_balance, 0).mean() + agree.mean(1)).mean()


def do_estimate(model, batches, epochs=2):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(epochs):
        running_loss = 0.0
        for i_batch, inputs in enumerate(batches):
            optimizer.zero_grad()
            loss = model(inputs)
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
        print(epoch, running_loss / len(batches))
    return running_loss


torch.manual_seed(0)
print(type(do_estimate(NaiveBayes(), [torch.randint(0, 4, (16, 5)) for _ in range(10)])).__name__)
