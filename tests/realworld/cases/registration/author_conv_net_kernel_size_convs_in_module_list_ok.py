"""The authorship convolution model with its per-height convolutions wrapped in `nn.ModuleList` (the fix for the report; the module then behaves as its author expected): the convolutions are registered submodules, so `fit` hands their weights to Adadelta, they train with the linear layers, and `state_dict()` saves them.

source: https://github.com/pytorch/pytorch/issues/52972
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.optim as optim


class AuthorConvNet(nn.Module):
    def __init__(self, embedding_dim, hidden_dim=200, dropout_rate=0.3, max_conv_size=3,
                 criterion=nn.L1Loss(), optimizer=optim.Adadelta):
        """2D convolutions with 1D kernels of height 1,...,max_conv_size over the word embeddings."""
        super().__init__()
        self.criterion = criterion
        self.optimizer = optimizer
        self.dropout = nn.Dropout(dropout_rate)
        self.max_conv_size = max_conv_size
        self.max_pool = lambda x: torch.max(x, dim=len(x.size()) - 2)[0]  # max over the rows
        self.embedding_dim = embedding_dim
        self.hidden_dim = hidden_dim
        self.convs = nn.ModuleList([nn.Conv2d(1, 1, (i, 1)) for i in range(1, self.max_conv_size + 1)])
        self.relu = nn.ReLU()
        self.linear1 = nn.Linear(embedding_dim * max_conv_size, hidden_dim)
        self.linear2 = nn.Linear(hidden_dim, hidden_dim)
        self.linear3 = nn.Linear(hidden_dim, 1)

    def forward(self, x):
        z = x.unsqueeze(1)  # (batch, 1, words, embedding_dim)
        z = torch.cat([self.max_pool(self.relu(conv(z))).squeeze(1) for conv in self.convs], dim=1)
        z = self.dropout(self.relu(self.linear1(z)))
        z = self.dropout(self.relu(self.linear2(z)))
        return self.linear3(z).squeeze(1)

    def fit(self, texts, targets, epochs=5):
        optimizer = self.optimizer(self.parameters())
        for epoch in range(epochs):
            optimizer.zero_grad()
            loss = self.criterion(self(texts), targets)
            loss.backward()
            optimizer.step()
            print(f"epoch {epoch}: loss {loss.item():.4f}")


torch.manual_seed(0)
net = AuthorConvNet(embedding_dim=16, hidden_dim=32)
before = [conv.weight.detach().clone() for conv in net.convs]
texts, targets = torch.randn(24, 10, 16), torch.rand(24)
net.fit(texts, targets)
moved = max((conv.weight - b).abs().max().item() for conv, b in zip(net.convs, before))
print(f"conv weights moved {moved:.4f}; conv grad set: {net.convs[0].weight.grad is not None}; "
      f"'convs.0.weight' saved: {'convs.0.weight' in net.state_dict()}")
