"""Cheetah's Segment plotting routines hand the tracked beam positions straight to Matplotlib, which converts them with numpy; when an element's parameter is a tensor with requires_grad=True (as for gradient-based tuning) the positions carry a graph and the plot fails.

source: https://github.com/desy-ml/cheetah/issues/287
kind: bug
symptom: crash
verified: RuntimeError: Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.
"""
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402


class Drift(nn.Module):
    def __init__(self, length):
        super().__init__()
        self.length = torch.as_tensor(length)

    def transfer_map(self):
        return torch.stack([torch.stack([torch.tensor(1.0), self.length]),
                            torch.stack([torch.tensor(0.0), torch.tensor(1.0)])])


class Quadrupole(nn.Module):
    def __init__(self, length, k1):
        super().__init__()
        self.length = torch.as_tensor(length)
        self.k1 = torch.as_tensor(k1)

    def transfer_map(self):
        kl = self.k1 * self.length
        return torch.stack([torch.stack([torch.tensor(1.0), self.length]),
                            torch.stack([-kl, torch.tensor(1.0)])])


class Segment(nn.Module):
    def __init__(self, elements):
        super().__init__()
        self.elements = elements

    def track(self, incoming):
        positions, s, longitudinal = [incoming[:, 0]], 0.0, [0.0]
        x = incoming
        for element in self.elements:
            x = x @ element.transfer_map().T
            s += float(element.length)
            positions.append(x[:, 0])
            longitudinal.append(s)
        return x, longitudinal, positions

    def plot_reference_particle_traj(self, incoming, ax):
        _, longitudinal, positions = self.track(incoming)
        for i in range(incoming.shape[0]):
            ax.plot(longitudinal, [p[i] for p in positions])  # ROOT


k1 = torch.tensor(4.2, requires_grad=True)
segment = Segment([Drift(0.5), Quadrupole(0.2, k1), Drift(0.5)])
incoming = torch.tensor([[1e-3, 0.0], [-1e-3, 1e-4]])
outgoing, _, _ = segment.track(incoming)
loss = outgoing[:, 0].pow(2).sum()
loss.backward()
fig, ax = plt.subplots()
segment.plot_reference_particle_traj(incoming, ax)  # SYMPTOM
fig.savefig("segment.png")
