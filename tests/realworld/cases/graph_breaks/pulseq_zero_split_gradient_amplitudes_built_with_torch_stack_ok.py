"""The same split_gradient with the pieces built by join(*args) = torch.stack([torch.as_tensor(x) ...]) (the fix): the stacked waveforms and times keep the amplitude and rise time in the graph, so the ramp-up area term trains them.

source: https://github.com/MRsources/pulseq-zero/issues/20
kind: lookalike
"""
from dataclasses import dataclass

import torch


@dataclass
class TrapGrad:
    channel: str
    amplitude: torch.Tensor
    rise_time: torch.Tensor
    flat_time: torch.Tensor
    fall_time: torch.Tensor
    delay: float = 0.0

    @property
    def area(self):
        return self.amplitude * (self.rise_time / 2 + self.flat_time + self.fall_time / 2)

    @property
    def duration(self):
        return self.delay + self.rise_time + self.flat_time + self.fall_time


@dataclass
class FreeGrad:
    channel: str
    waveform: torch.Tensor
    delay: torch.Tensor
    tt: torch.Tensor

    @property
    def area(self):
        return 0.5 * ((self.tt[1:] - self.tt[:-1]) * (self.waveform[1:] + self.waveform[:-1])).sum()


def make_extended_trapezoid(channel, amplitudes, times):
    return FreeGrad(channel, amplitudes, times[0], times - times[0])


def split_gradient(grad):
    total_duration = grad.duration
    def join(*args):
        return torch.stack([torch.as_tensor(x, dtype=torch.float32) for x in args])

    ramp_up = make_extended_trapezoid(
        channel=grad.channel,
        amplitudes=join(0, grad.amplitude),
        times=join(0, grad.rise_time))
    flat_top = make_extended_trapezoid(
        channel=grad.channel,
        amplitudes=join(grad.amplitude, grad.amplitude),
        times=join(grad.rise_time, grad.rise_time + grad.flat_time))
    ramp_down = make_extended_trapezoid(
        channel=grad.channel,
        amplitudes=join(grad.amplitude, 0),
        times=join(grad.rise_time + grad.flat_time, total_duration))
    return ramp_up, flat_top, ramp_down


amplitude = torch.tensor(1.0, requires_grad=True)
rise_time = torch.tensor(0.5, requires_grad=True)
flat_time = torch.tensor(2.0)
opt = torch.optim.Adam([amplitude, rise_time], lr=0.05)
for step in range(200):
    gx = TrapGrad('x', amplitude, rise_time, flat_time, rise_time)
    ramp_up, flat_top, ramp_down = split_gradient(gx)
    loss = (gx.area - 3.0) ** 2 + (ramp_up.area - 0.6) ** 2
    opt.zero_grad()
    loss.backward()
    opt.step()
print(step, amplitude.item(), rise_time.item(), (ramp_up.area - 0.6).abs().item())
