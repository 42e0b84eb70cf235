"""EvolveGCN-O: the GRU-evolved weight is stored back with nn.Parameter(W), a new leaf, so the recurrent layer never gets a gradient.

source: https://github.com/benedekrozemberczki/pytorch_geometric_temporal/issues/80
kind: bug
symptom: silent
verified: recurrent_layer weights have .grad None after backward and never change; the GCN weight the optimizer holds never changes either
"""
import torch


class GCNConv(torch.nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.weight = torch.nn.parameter.Parameter(torch.Tensor(in_channels, out_channels).fill_(0.5))

    def forward(self, X, adj):
        return adj @ (X @ self.weight)


class EvolveGCNO(torch.nn.Module):
    def __init__(self, in_channels):
        super(EvolveGCNO, self).__init__()
        self.in_channels = in_channels
        self.conv_layer = GCNConv(in_channels=in_channels, out_channels=in_channels)
        self.recurrent_layer = torch.nn.GRU(input_size=in_channels, hidden_size=in_channels, num_layers=1)

    def forward(self, X, adj):
        W = self.conv_layer.weight[None, :, :]
        W, _ = self.recurrent_layer(W, W)
        self.conv_layer.weight = torch.nn.parameter.Parameter(W.squeeze(dim=0))  # ROOT
        return self.conv_layer(X, adj)


torch.manual_seed(123)
model = EvolveGCNO(in_channels=4)
head = torch.nn.Linear(4, 1)
optimizer = torch.optim.Adam(list(model.parameters()) + list(head.parameters()), lr=0.01)
adj = torch.eye(5) + torch.rand(5, 5).round()
X, y = torch.randn(5, 4), torch.randn(5, 1)
for snapshot in range(3):
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(head(model(X, adj)), y)
    loss.backward()
    optimizer.step()
