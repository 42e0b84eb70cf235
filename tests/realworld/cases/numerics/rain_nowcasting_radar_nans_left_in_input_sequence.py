"""A radar precipitation nowcasting model (binned cross-entropy over rain classes per pixel) reads radar sequences in which failed scans are NaN; the data scraper replaces NaNs with zeros only in the copy it uses to filter samples, and the training step feeds the raw input sequence to the network, so the first batch holding a failed scan gives NaN predictions, a NaN loss, and an optimizer step that turns every weight into NaN, with no error.

source: https://github.com/Osrip/deep_learn_rain_nowcasting/commit/7e8a93448765aa7914c1bb1470cf388db560883b
kind: bug
symptom: silent
verified: losses [2.11, 2.09, nan, nan, nan, nan] over six steps and 100% of the weights are NaN afterwards; the look-alike's losses stay finite (last 2.07) with 0% NaN weights
"""
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

FRAMES, BINS, SIZE = 4, 8, 16


class RadarSequences(torch.utils.data.Dataset):
    def __init__(self, n=24):
        self.frames = torch.rand(n, FRAMES + 1, SIZE, SIZE) ** 3 * 20
        self.frames[9, 1, :4, :4] = float("nan")  # a failed scan in one input frame
        self.mean, self.std = 2.0, 4.0
        filled = torch.nan_to_num(self.frames, nan=0.0)  # used for filtering only
        self.keep = [i for i in range(n) if filled[i, FRAMES].mean() > 0.1]

    def __len__(self):
        return len(self.keep)

    def __getitem__(self, i):
        seq = self.frames[self.keep[i]]
        input_sequence = (seq[:FRAMES] - self.mean) / self.std
        target = seq[FRAMES]
        target_binned = torch.bucketize(target, torch.linspace(0.5, 15, BINS - 1))
        return input_sequence, target_binned


class NowcastNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(FRAMES, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, BINS, 1))

    def forward(self, x):
        return self.net(x)


def training_step(model, batch):
    input_sequence, target_binned = batch  # ROOT
    pred = model(input_sequence.float())
    return F.cross_entropy(pred, target_binned)


model = NowcastNet()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
loader = torch.utils.data.DataLoader(RadarSequences(), batch_size=4, shuffle=False)
losses = []
for batch in loader:
    loss = training_step(model, batch)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(round(loss.item(), 2))

weights = torch.cat([p.detach().flatten() for p in model.parameters()])
print(f"losses {losses}; NaN weights: {100 * weights.isnan().float().mean().item():.0f}%")
