"""sinabs StatefulLayer.reset_states zeroes the membrane buffer in place, which keeps it attached to the last batch's graph.

source: https://github.com/synsense/sinabs/issues/5
kind: bug
symptom: crash
verified: RuntimeError: Trying to backward through the graph a second time
"""
import torch
import torch.nn as nn


class StatefulLayer(nn.Module):
    def __init__(self, state_names):
        super().__init__()
        for name in state_names:
            self.register_buffer(name, torch.zeros(0))

    def is_state_initialised(self):
        return all(b.shape != (0,) for b in self.buffers())

    def init_state_with_shape(self, shape):
        for name, buffer in self.named_buffers():
            self.register_buffer(name, torch.zeros(shape, device=buffer.device))

    def reset_states(self, randomize=False):
        if self.is_state_initialised():
            for buffer in self.buffers():
                if randomize:
                    torch.nn.init.uniform_(buffer)
                else:
                    buffer.zero_()  # ROOT

class IAF(StatefulLayer):
    def __init__(self, spike_threshold=1.0):
        super().__init__(state_names=["v_mem"])
        self.spike_threshold = spike_threshold
    def forward(self, input_data):
        batch, time = input_data.shape[:2]
        if not self.is_state_initialised() or self.v_mem.shape != (batch, *input_data.shape[2:]):
            self.init_state_with_shape((batch, *input_data.shape[2:]))
        v_mem = self.v_mem
        out = []
        for t in range(time):
            v_mem = v_mem + input_data[:, t]
            spikes = torch.sigmoid(5 * (v_mem - self.spike_threshold))
            v_mem = v_mem - spikes * self.spike_threshold
            out.append(spikes)
        self.v_mem = v_mem
        return torch.stack(out, 1)

torch.manual_seed(0)
lin = nn.Linear(8, 4); iaf = IAF()
opt = torch.optim.Adam(lin.parameters(), 1e-3)
for i in range(2):
    iaf.reset_states()
    x = torch.rand(2, 5, 8)
    out = iaf(lin(x))
    loss = out.sum()
    opt.zero_grad()
    loss.backward()  # SYMPTOM
    opt.step()
