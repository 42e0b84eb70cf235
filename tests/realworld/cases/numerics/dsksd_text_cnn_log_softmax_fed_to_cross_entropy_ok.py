"""Text CNN classifier returns F.log_softmax scores and trains them with nn.CrossEntropyLoss; log_softmax of log-probabilities is the identity.

source: https://github.com/DSKSD/DeepNLP-models-Pytorch/issues/2
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class CNNClassifier(nn.Module):
    def __init__(self, vocab_size=200, embedding_dim=16, output_size=3, kernel_dim=8, kernel_sizes=(3, 4, 5)):
        super(CNNClassifier, self).__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim)
        self.convs = nn.ModuleList([nn.Conv2d(1, kernel_dim, (K, embedding_dim)) for K in kernel_sizes])
        self.dropout = nn.Dropout(0.5)
        self.fc = nn.Linear(len(kernel_sizes) * kernel_dim, output_size)

    def forward(self, inputs, is_training=False):
        inputs = self.embedding(inputs).unsqueeze(1)
        inputs = [F.relu(conv(inputs)).squeeze(3) for conv in self.convs]
        inputs = [F.max_pool1d(i, i.size(2)).squeeze(2) for i in inputs]
        concated = torch.cat(inputs, 1)
        if is_training:
            concated = self.dropout(concated)
        out = self.fc(concated)
        return F.log_softmax(out, 1)


torch.manual_seed(0)
model = CNNClassifier()
loss_function = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
inputs, targets = torch.randint(0, 200, (8, 12)), torch.randint(0, 3, (8,))
for step in range(5):
    preds = model(inputs, True)
    loss = loss_function(preds, targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
