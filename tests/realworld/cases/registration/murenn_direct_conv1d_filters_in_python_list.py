"""murenn's MuReNNDirect keeps its per-scale learnable Conv1d filters (and the per-scale downsampling DTCWTs) in plain Python lists `self.conv1d` and `self.down`; the forward uses them, but they are not submodules, so `model.parameters()` (and `.to()`, `state_dict()`) never sees the filters: a classifier trained on top of the front-end only trains its head, and the wavelet filters stay at their random init.

source: https://github.com/kymatio/murenn/pull/44
kind: bug
symptom: silent
verified: MuReNNDirect.parameters() is empty; after 10 Adam steps of the classifier the Conv1d filters are unchanged while the linear head moved
"""
import torch
import torch.nn.functional as F

torch.manual_seed(0)


class DTCWT(torch.nn.Module):
    """Stands in for murenn.DTCWT: a fixed (parameter-free) dyadic filter bank returning the lowpass signal and
    a complex band-pass signal per level, halving the length at each level; skip_hps drops the first highpass."""

    def __init__(self, J=8, padding_mode="symmetric", skip_hps=False):
        super().__init__()
        self.J, self.skip_hps = J, skip_hps
        self.register_buffer("h0", torch.tensor([0.5, 0.5]).view(1, 1, 2))
        self.register_buffer("h1r", torch.tensor([0.5, -0.5]).view(1, 1, 2))
        self.register_buffer("h1i", torch.tensor([-0.5, 0.5]).flip(-1).view(1, 1, 2) * 0.7)

    def _filt(self, x, h):
        C = x.shape[1]
        return F.conv1d(x, h.expand(C, 1, 2), stride=2, groups=C)

    def forward(self, x):
        bps = []
        lp = x
        for j in range(self.J):
            if not (self.skip_hps and j == 0):
                bps.append(torch.complex(self._filt(lp, self.h1r), self._filt(lp, self.h1i)))
            lp = self._filt(lp, self.h0)
        return lp, bps


class MuReNNDirect(torch.nn.Module):
    def __init__(self, *, J, Q, T, in_channels, padding_mode="symmetric"):
        super().__init__()
        self.Q = Q
        self.C = in_channels
        self.down = []
        self.conv1d = []  # ROOT
        self.dtcwt = DTCWT(J=J, padding_mode=padding_mode)
        for j in range(J):
            down_j = DTCWT(J=J - j - 1, padding_mode=padding_mode, skip_hps=True)
            self.down.append(down_j)
            conv1d_j = torch.nn.Conv1d(in_channels=in_channels, out_channels=Q * in_channels, kernel_size=T,
                                       bias=False, groups=in_channels, padding="same")
            torch.nn.init.normal_(conv1d_j.weight)
            self.conv1d.append(conv1d_j)

    def forward(self, x):
        assert self.C == x.shape[1]
        _, bps = self.dtcwt(x)
        ys = []
        for j in range(self.dtcwt.J):
            Wx_r = self.conv1d[j](bps[j].real)
            Wx_i = self.conv1d[j](bps[j].imag)
            Ux = Wx_r ** 2 + Wx_i ** 2
            y_j, _ = self.down[j](Ux)
            B, _, N = y_j.shape
            y_j = y_j.view(B, self.C, self.Q, N)
            ys.append(y_j)
        return torch.stack(ys, dim=3)


class Classifier(torch.nn.Module):
    def __init__(self, J=3, Q=4, T=5, n_classes=3, length=64):
        super().__init__()
        self.frontend = MuReNNDirect(J=J, Q=Q, T=T, in_channels=1)
        self.head = torch.nn.Linear(Q * J * (length // 2 ** J), n_classes)

    def forward(self, x):
        return self.head(torch.log1p(self.frontend(x)).flatten(1))


model = Classifier()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
filters_before = [torch.stack([c.weight.detach().clone() for c in model.frontend.conv1d])]
head_before = model.head.weight.detach().clone()
for step in range(10):
    x, labels = torch.randn(16, 1, 64), torch.randint(0, 3, (16,))
    loss = F.cross_entropy(model(x), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

filters_after = torch.stack([c.weight.detach() for c in model.frontend.conv1d])
print(f"MuReNNDirect parameters: {len(list(model.frontend.parameters()))}; "
      f"filters changed: {not torch.equal(filters_before[0], filters_after)}; "
      f"head changed: {not torch.equal(head_before, model.head.weight)}")
