"""LiquidNet's LTC cell only learns its input size when it first sees data: `forward` calls `_get_variables()` on the first batch, and that is where every `nn.Parameter` of the cell (sensory and recurrent mu, sigma, W, erev, leak and capacitance) is created and registered. The training script builds `optim.SGD(model.parameters(), ...)` right after constructing the model, before any forward pass, so the optimizer sees no parameters and raises.

source: https://github.com/kyegomez/LiqudNet/issues/6
kind: bug
symptom: crash
verified: ValueError: optimizer got an empty parameter list
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


class LiquidNet(nn.Module):
    """Liquid time-constant cell (semi-implicit Euler), parameters built lazily from the first input."""

    def __init__(self, num_units, ode_unfolds=6):
        super().__init__()
        self._num_units = num_units
        self._input_size = -1
        self._is_built = False
        self._ode_unfolds = ode_unfolds

    @property
    def state_size(self):
        return self._num_units

    def _get_variables(self):
        n_in, n = self._input_size, self._num_units
        self.sensory_mu = nn.Parameter(torch.rand(n_in, n) * 0.5 + 0.3)
        self.sensory_sigma = nn.Parameter(torch.rand(n_in, n) * 5.0 + 3.0)
        self.sensory_W = nn.Parameter(torch.empty(n_in, n).uniform_(0.01, 1.0))
        self.sensory_erev = nn.Parameter(torch.randint(0, 2, (n_in, n)).float() * 2 - 1)
        self.mu = nn.Parameter(torch.rand(n, n) * 0.5 + 0.3)
        self.sigma = nn.Parameter(torch.rand(n, n) * 5.0 + 3.0)
        self.W = nn.Parameter(torch.empty(n, n).uniform_(0.01, 1.0))
        self.erev = nn.Parameter(torch.randint(0, 2, (n, n)).float() * 2 - 1)
        self.vleak = nn.Parameter(torch.rand(n) * 0.4 - 0.2)
        self.gleak = nn.Parameter(torch.ones(n))
        self.cm_t = nn.Parameter(torch.full((n,), 0.5))

    @staticmethod
    def _sigmoid(v_pre, mu, sigma):
        return torch.sigmoid(sigma * (v_pre.unsqueeze(-1) - mu))

    def forward(self, inputs, state):
        if not self._is_built:
            self._is_built = True
            self._input_size = int(inputs.shape[-1])
            self._get_variables()  # ROOT
        sensory = self.sensory_W * self._sigmoid(inputs, self.sensory_mu, self.sensory_sigma)
        num_sensory = (sensory * self.sensory_erev).sum(dim=1)
        den_sensory = sensory.sum(dim=1)
        v_pre = state
        for _ in range(self._ode_unfolds):
            w_act = self.W * self._sigmoid(v_pre, self.mu, self.sigma)
            numerator = self.cm_t * v_pre + self.gleak * self.vleak + (w_act * self.erev).sum(dim=1) + num_sensory
            denominator = self.cm_t + self.gleak + w_act.sum(dim=1) + den_sensory
            v_pre = numerator / denominator
        return v_pre, v_pre


def make_batches(n_batches=10, batch=16, seq=5, features=6):
    out = []
    for _ in range(n_batches):
        x = torch.randn(batch, seq, features)
        out.append((x, (x[:, :, 0].mean(dim=1) > 0).long()))
    return out


def run_sequence(model, x):
    state = torch.zeros(x.shape[0], model.state_size)
    for t in range(x.shape[1]):
        out, state = model(x[:, t], state)
    return out[:, :2]


def train(model, optimizer, batches):
    criterion = nn.CrossEntropyLoss()
    for x, y in batches:
        loss = criterion(run_sequence(model, x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    model = LiquidNet(num_units=8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9)
    batches = make_batches()
    print("final loss:", round(train(model, optimizer, batches), 4))
    print("registered parameters:", sum(p.numel() for p in model.parameters()))


if __name__ == "__main__":
    main()
