"""s3prl's `UpstreamDriver` freezes the pretrained speech upstream with `self.upstream.requires_grad_(False)` when `freeze_upstream=True`, but the training loop's `model.train()` puts every submodule, the frozen upstream included, in training mode: its dropout layers stay active, so the "frozen" feature extractor hands the weighted-sum layer and the downstream head a different random feature for the same utterance on every call.

source: https://github.com/s3prl/s3prl/commit/bd28eb2334c50e3dafbf62104bd379a19dda9f84
kind: bug
symptom: silent
verified: the frozen upstream's features for the same probe batch differ between two calls during training (identical: False, max difference 2.8 here); the look-alike's are identical: True
"""
import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)


class TinyUpstream(nn.Module):
    """Stands in for a pretrained wav2vec2/HuBERT upstream: conv feature encoder and two transformer layers with dropout."""

    def __init__(self, dim=32, layers=2, dropout=0.1):
        super().__init__()
        self.feature_extractor = nn.Sequential(nn.Conv1d(1, dim, 10, 5), nn.GELU(), nn.Conv1d(dim, dim, 3, 2), nn.GELU())
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(dim, 4, 2 * dim, dropout=dropout, batch_first=True) for _ in range(layers))
        self.downsample_rate = 10

    def forward(self, wav, wav_len):
        h = self.dropout(self.feature_extractor(wav.transpose(1, 2)).transpose(1, 2))
        hs = [h]
        for layer in self.layers:
            h = layer(h)
            hs.append(h)
        return hs, wav_len // self.downsample_rate


class WeightedSum(nn.Module):
    def __init__(self, num_layer):
        super().__init__()
        self.weights = nn.Parameter(torch.zeros(num_layer))

    def forward(self, hs):
        weights = F.softmax(self.weights, dim=-1)
        return (hs * weights.view(-1, 1, 1, 1)).sum(dim=0)


class UpstreamDriver(nn.Module):
    def __init__(self, freeze_upstream=True, normalize=False):
        super().__init__()
        self.upstream = TinyUpstream()
        self.normalize = normalize
        if freeze_upstream:
            self.upstream.requires_grad_(False)
        self.weights = WeightedSum(len(self.upstream.layers) + 1)

    def forward(self, x, x_len):
        hs, h_len = self.upstream(x, x_len)  # ROOT
        if self.normalize:
            hs = [F.layer_norm(h, (h.size(-1),)) for h in hs]
        return self.weights(torch.stack(hs, dim=0)), h_len


class UpstreamDownstreamModel(nn.Module):
    def __init__(self, upstream, num_classes=4):
        super().__init__()
        self.upstream = upstream
        self.downstream = nn.Linear(32, num_classes)

    def forward(self, x, x_len):
        y, y_len = self.upstream(x, x_len)
        return self.downstream(y.mean(1))


model = UpstreamDownstreamModel(UpstreamDriver(freeze_upstream=True))
optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
wavs = torch.randn(64, 400, 1)
wav_lens = torch.full((64,), 400)
labels = torch.randint(0, 4, (64,))
probe = wavs[:4]

model.train()
for step in range(8):
    idx = torch.randint(0, 64, (16,))
    loss = F.cross_entropy(model(wavs[idx], wav_lens[idx]), labels[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

with torch.no_grad():
    first, _ = model.upstream(probe, wav_lens[:4])
    second, _ = model.upstream(probe, wav_lens[:4])
diff = (first - second).abs().max().item()
print(f"frozen upstream features identical across two calls in training: {diff == 0.0} (max difference {diff:.3f})")
