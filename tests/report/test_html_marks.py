"""The HTML report draws 'no update', 'no gradient' and code spans as what they are (issue 15)."""
from __future__ import annotations

import re

import torch
import torch.nn as nn

import gradtrace
from gradtrace.report import svg


class _Cut(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body, self.head = nn.Linear(4, 4), nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x).detach())


def test_zero_updates_no_gradient_and_backticks() -> None:
    torch.manual_seed(0)
    m = _Cut()
    opt = torch.optim.SGD(m.parameters(), lr=0.0)  # every update is exactly zero
    with gradtrace.watch(m, opt) as w:
        for _ in range(3):
            opt.zero_grad()
            m(torch.randn(8, 4)).sum().backward()
            opt.step()
    track = w.report.tracks[0]
    ratios = svg.heat_map(track, ratios=True)
    cells = re.findall(r'fill="(#[0-9a-f]{6})"><title>(\w+) step \d+: ([^<]+)</title>', ratios)
    zero = [fill for fill, _, value in cells if value == "0"]
    assert zero and set(zero) == {svg.ZERO} and svg.ZERO != svg.color(0.0)
    bars = svg.flow_bars(track)
    stub = re.search(r'height="([\d.]+)" fill="%s"><title>body.weight: no gradient' % svg.GREY,
                     bars)
    assert stub is not None and float(stub.group(1)) <= 6  # not a full-height bar
    from gradtrace.report.html import render_html

    html = render_html(w.report)
    assert "`" not in re.sub(r"<svg.*?</svg>", "", html, flags=re.S)
    assert "<code>" in html
