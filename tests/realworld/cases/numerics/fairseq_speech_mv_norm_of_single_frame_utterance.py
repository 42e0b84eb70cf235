"""fairseq speech_recognition: features are mean-variance normalised per utterance with torch.std (unbiased), and an utterance with a single spectrogram frame has std NaN, so the whole input becomes NaN and the loss and every gradient of the model turn NaN.

source: https://github.com/facebookresearch/fairseq/issues/1863
kind: bug
symptom: silent
verified: apply_mv_norm of a 1-frame utterance is all NaN; the batch loss is NaN and every encoder weight is NaN after the optimizer step
"""
import torch
import torch.nn as nn


def apply_mv_norm(features):
    mean = features.mean(dim=0)
    std = features.std(dim=0)  # ROOT
    return (features - mean) / std


class Encoder(nn.Module):
    def __init__(self, n_mels=40, hidden=32, vocab=10):
        super().__init__()
        self.rnn = nn.GRU(n_mels, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, x):
        h, _ = self.rnn(x)
        return self.out(h[:, -1])


torch.manual_seed(0)
model = Encoder()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
utterances = [torch.randn(12, 40), torch.randn(1, 40), torch.randn(7, 40)]  # the second has a single frame
targets = torch.tensor([1, 4, 7])
loss = 0
for feats, target in zip(utterances, targets):
    x = apply_mv_norm(feats).unsqueeze(0)
    loss = loss + nn.functional.cross_entropy(model(x), target.unsqueeze(0))
optimizer.zero_grad()
loss.backward()
optimizer.step()
print(loss.item(), torch.isnan(model.out.weight).all().item())
