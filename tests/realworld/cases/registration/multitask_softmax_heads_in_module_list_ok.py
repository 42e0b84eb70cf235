"""Multitask model keeps one Linear head per task in an nn.ModuleList, so all heads are trained.

source: https://github.com/pytorch/pytorch/issues/15005
kind: lookalike
"""
import numpy as np
import torch
import torch.nn as nn

num_classes = [5, 2, 10, 3]


class test(nn.Module):
    def __init__(self, input_features):
        super(test, self).__init__()
        self.softmaxes = nn.ModuleList()
        for i in range(4):
            self.softmaxes.append(nn.Linear(input_features, num_classes[i]))

    def forward(self, batch_in):
        batch_in = torch.FloatTensor(batch_in)
        classify = []
        for i in range(4):
            classify.append(self.softmaxes[i](batch_in))
        return classify


if __name__ == "__main__":
    batch_size, lr, input_features, train_samples = 32, 0.0001, 100, 64
    X_train = np.random.rand(train_samples, input_features)
    y_trains = [np.random.randint(0, c, train_samples) for c in num_classes]
    model = test(input_features)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    criterion = nn.CrossEntropyLoss()
    for start in range(0, train_samples, batch_size):
        outputs = model(X_train[start:start + batch_size])
        loss = sum(criterion(out, torch.LongTensor(y[start:start + batch_size]))
                   for out, y in zip(outputs, y_trains))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
