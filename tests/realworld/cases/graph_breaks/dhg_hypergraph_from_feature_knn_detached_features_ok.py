"""DHG's Hypergraph.from_feature_kNN after the fix: the kNN query reads features.cpu().detach().numpy(), so a hypergraph built from learned features costs no gradient path (the structure is discrete) and the layers still train through the smoothing.

source: https://github.com/iMoonLab/DeepHypergraph/issues/19
kind: lookalike
"""
import scipy.spatial
import torch
import torch.nn as nn
import torch.nn.functional as F


class Hypergraph:
    def __init__(self, num_v, e_list):
        self.num_v = num_v
        H = torch.zeros(num_v, len(e_list))
        for e_idx, e in enumerate(e_list):
            H[list(e), e_idx] = 1.0
        self.H = H

    def smoothing_with_HGNN(self, X):
        D_v = self.H.sum(1).pow(-0.5).unsqueeze(1)
        D_e = self.H.sum(0).pow(-1).unsqueeze(1)
        return D_v * (self.H @ (D_e * (self.H.t() @ (D_v * X))))

    @staticmethod
    def _e_list_from_feature_kNN(features, k):
        features = features.cpu().detach().numpy()
        assert features.ndim == 2, "The feature matrix should be 2-D."
        tree = scipy.spatial.cKDTree(features)
        _, nbr_array = tree.query(features, k=k)
        return nbr_array.tolist()

    @staticmethod
    def from_feature_kNN(features, k):
        e_list = Hypergraph._e_list_from_feature_kNN(features, k)
        return Hypergraph(features.shape[0], e_list)


class HGNNConv(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.theta = nn.Linear(in_channels, out_channels)

    def forward(self, X, hg):
        return hg.smoothing_with_HGNN(self.theta(X))


class DynamicHGNN(nn.Module):
    def __init__(self, in_channels, hid_channels, num_classes, k=4):
        super().__init__()
        self.k = k
        self.embed = nn.Linear(in_channels, hid_channels)
        self.conv1 = HGNNConv(hid_channels, hid_channels)
        self.conv2 = HGNNConv(hid_channels, num_classes)

    def forward(self, X):
        X = F.relu(self.embed(X))
        hg = Hypergraph.from_feature_kNN(X, self.k)
        X = F.relu(self.conv1(X, hg))
        return self.conv2(X, hg)


torch.manual_seed(0)
X, lbl = torch.randn(40, 16), torch.randint(0, 3, (40,))
net = DynamicHGNN(16, 32, 3)
optimizer = torch.optim.Adam(net.parameters(), lr=0.01)
for epoch in range(5):
    optimizer.zero_grad()
    outs = net(X)
    loss = F.cross_entropy(outs, lbl)
    loss.backward()
    optimizer.step()
print("loss", loss.item())
