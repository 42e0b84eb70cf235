"""mmaction2's MS-G3D project: ST_MSGCN (the spatial-temporal graph convolution of the G3D pathway) adds its residual with `out += res` to the output of `self.mlp`, whose last layer is the MLP's ReLU; ReLU saves its output for backward, so the in-place add (even of the integer 0 that the residual lambda returns when `residual=False`) invalidates it, and the first training step of an MS-G3D model fails in backward.

source: https://github.com/open-mmlab/mmaction2/commit/bc90644705513813b322643b5dc8fb58d22174f1
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)


def build_activation_layer(cfg):
    return {"ReLU": nn.ReLU}[cfg["type"]]()


def k_adjacency(A, k, with_self=False, self_factor=1):
    I = np.eye(len(A), dtype=A.dtype)
    if k == 0:
        return I
    Ak = np.minimum(np.linalg.matrix_power(A + I, k), 1) - np.minimum(np.linalg.matrix_power(A + I, k - 1), 1)
    if with_self:
        Ak += self_factor * I
    return Ak


def normalize_digraph(A, dim=0):
    Dl = np.sum(A, dim)
    Dn = np.zeros_like(A)
    for i in range(len(A)):
        if Dl[i] > 0:
            Dn[i, i] = Dl[i] ** (-1)
    return A @ Dn


class MLP(nn.Module):
    def __init__(self, in_channels, out_channels, act_cfg=dict(type="ReLU"), dropout=0):
        super().__init__()
        channels = [in_channels] + out_channels
        self.layers = nn.ModuleList()
        for i in range(1, len(channels)):
            if dropout > 1e-3:
                self.layers.append(nn.Dropout(p=dropout))
            self.layers.append(nn.Conv2d(channels[i - 1], channels[i], kernel_size=1))
            self.layers.append(nn.BatchNorm2d(channels[i]))
            if act_cfg:
                self.layers.append(build_activation_layer(act_cfg))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class ST_MSGCN(nn.Module):
    def __init__(self, in_channels, out_channels, A, num_scales, window_size, residual=False, dropout=0,
                 act_cfg=dict(type="ReLU")):
        super().__init__()
        self.num_scales = num_scales
        self.window_size = window_size
        A = self.build_st_graph(A, window_size)
        A_scales = [k_adjacency(A, k, with_self=True) for k in range(num_scales)]
        A_scales = np.stack([normalize_digraph(g) for g in A_scales])
        self.register_buffer("A", torch.Tensor(A_scales))
        self.V = len(A)
        self.PA = nn.Parameter(self.A.clone())
        nn.init.uniform_(self.PA, -1e-6, 1e-6)
        self.mlp = MLP(in_channels * num_scales, [out_channels], dropout=dropout, act_cfg=act_cfg)
        if not residual:
            self.residual = lambda x: 0
        elif in_channels == out_channels:
            self.residual = lambda x: x
        else:
            self.residual = MLP(in_channels, [out_channels], act_cfg=None)
        self.act = build_activation_layer(act_cfg)

    def build_st_graph(self, A, window_size):
        if not isinstance(A, np.ndarray):
            A = A.data.cpu().numpy()
        assert len(A.shape) == 2 and A.shape[0] == A.shape[1]
        V = len(A)
        A_with_I = A + np.eye(V, dtype=A.dtype)
        return np.tile(A_with_I, (window_size, window_size)).copy()

    def forward(self, x):
        N, C, T, V = x.shape
        A = self.A + self.PA
        res = self.residual(x)
        agg = torch.einsum("kvu,nctv->nkctu", A, x)
        agg = agg.reshape(N, self.num_scales * C, T, V)
        out = self.mlp(agg)
        out += res  # ROOT
        return self.act(out)


class G3DPathway(nn.Module):
    """Unfold windows of `window_size` frames, ST_MSGCN over the window graph, collapse the window (as MSG3DBlock)."""

    def __init__(self, A, in_channels=3, out_channels=16, window_size=3, num_scales=2):
        super().__init__()
        self.window_size = window_size
        self.unfold = nn.Unfold(kernel_size=(window_size, 1), padding=(window_size // 2, 0))
        self.gcn3d = ST_MSGCN(in_channels, out_channels, A, num_scales, window_size, residual=False)
        self.out_conv = nn.Conv3d(out_channels, out_channels, kernel_size=(1, window_size, 1))

    def forward(self, x):
        N, C, T, V = x.shape
        x = self.unfold(x).view(N, C, self.window_size, T, V).permute(0, 1, 3, 2, 4).reshape(N, C, T, -1)
        x = self.gcn3d(x).view(N, -1, T, self.window_size, V)
        return self.out_conv(x).squeeze(3)


V = 5
A = np.zeros((V, V), dtype=np.float32)
for i, j in [(0, 1), (1, 2), (1, 3), (1, 4)]:
    A[i, j] = A[j, i] = 1
model = nn.Sequential(G3DPathway(A), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
for step in range(3):
    skeletons, labels = torch.randn(4, 3, 8, V), torch.randint(0, 4, (4,))
    loss = nn.functional.cross_entropy(model(skeletons), labels)
    optimizer.zero_grad()
    loss.backward()  # SYMPTOM
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}")
