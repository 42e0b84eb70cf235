"""Multi-exit network creates an empty nn.ModuleList and fills it by index instead of appending.

source: https://github.com/mary-phuong/multiexit-distillation/issues/2
kind: bug
symptom: crash
verified: IndexError: index 0 is out of range
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class MultiExitNet(nn.Module):
    class Block(nn.Module):
        def __init__(self, in_ch, out_ch):
            super().__init__()
            self.conv = nn.Conv2d(in_ch, out_ch, 3, padding=1)
            self.exit = nn.Linear(out_ch, 10)

        def forward(self, x):
            x = torch.relu(self.conv(x))
            return x, self.exit(x.mean(dim=(2, 3)))

    def __init__(self, n_blocks=3, widths=(3, 8, 16, 32)):
        super().__init__()
        self.blocks = nn.ModuleList()
        for i in range(n_blocks):
            self.blocks[i] = self.Block(widths[i], widths[i + 1])  # ROOT

    def forward(self, x):
        exits = []
        for block in self.blocks:
            x, logits = block(x)
            exits.append(logits)
        return exits


net = MultiExitNet()
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
x, y = torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,))
loss = sum(nn.functional.cross_entropy(out, y) for out in net(x))
optimizer.zero_grad()
loss.backward()
optimizer.step()
