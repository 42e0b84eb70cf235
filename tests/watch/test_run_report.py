"""`gradtrace run --report out.html script.py` watches what the script trains (watch_all)."""
from __future__ import annotations

from typing import Any

SCRIPT = """
import torch, torch.nn as nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(8, 16)
        self.head = nn.Linear(16, 2)
        self.aux = nn.Linear(16, 2)

    def forward(self, x):
        return self.head(torch.relu(self.body(x)))

torch.manual_seed(0)
net = Net()
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
for step in range(6):
    loss = nn.functional.mse_loss(net(torch.randn(16, 8)), torch.zeros(16, 2))
    opt.zero_grad()
    loss.backward()
    opt.step()
print("trained")
"""


def test_run_report_writes_one_html_with_the_trained_model(cli_inproc: Any) -> None:
    cli = cli_inproc  # `gradtrace run` in this process (torch imported once per worker)
    cli.write("train.py", SCRIPT)
    proc = cli("run", "--report", "out.html", "train.py")
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"trained" in proc.stdout
    html = (cli.cwd / "out.html").read_text(encoding="utf-8")
    assert "<h2>Net</h2>" in html and "6 steps" in html
    # the run's own finding (an unused layer: its module never ran) replaces the watch card
    assert "Net.aux.weight, Net.aux.bias never received a gradient" in html
    assert "never ran in a forward pass" in html and "GT850" not in html
    assert "<h3>Loss</h3>" in html  # the functional mse_loss, seen as the tensor of backward()
    assert "body.weight" in html and "<svg" in html
