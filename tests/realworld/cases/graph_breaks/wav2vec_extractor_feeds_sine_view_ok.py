"""A wav2vec feature-extractor distance between two synthesized sines with the waveform handed to the model as x.view(1, -1) (the reporter's helper without the torch.tensor copy): dist.backward() reaches the frequency fp through the cosine, and SGD tunes it.

source: https://github.com/facebookresearch/fairseq/issues/2789
kind: lookalike
"""
import warnings

import torch
import torch.nn as nn

warnings.filterwarnings("ignore", category=UserWarning)
T = torch.tensor


class ConvFeatureExtractionModel(nn.Module):
    """wav2vec's feature extractor: strided 1-d convolutions over the raw waveform."""

    def __init__(self, conv_layers=((32, 10, 5), (32, 8, 4), (32, 4, 2))):
        super().__init__()
        blocks, in_d = [], 1
        for dim, k, stride in conv_layers:
            blocks.append(nn.Sequential(nn.Conv1d(in_d, dim, k, stride=stride, bias=False),
                                        nn.GroupNorm(1, dim), nn.ReLU()))
            in_d = dim
        self.conv_layers = nn.ModuleList(blocks)

    def forward(self, x):
        x = x.unsqueeze(1)  # BxT -> BxCxT
        for conv in self.conv_layers:
            x = conv(x)
        return x


class Wav2VecModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.feature_extractor = ConvFeatureExtractionModel()


torch.manual_seed(0)
model = Wav2VecModel()
model.eval()

time = torch.linspace(0.0, 0.1, 1600)


def sine(f0):
    return T(0.5) * torch.cos(f0 * 2.0 * 3.14 * time)


def extractor(x):
    return model.feature_extractor(x.view(1, -1))


def wav2vecdist(x, y):
    return torch.mean(torch.abs(extractor(x) - extractor(y)))


ft = T(440.0)
with torch.enable_grad():
    fp = T(660.0, requires_grad=True)
    fp.retain_grad()
    dist = wav2vecdist(sine(ft), sine(fp))
    print(dist)
    dist.backward(retain_graph=False)
    print(fp.grad)

    opt = torch.optim.SGD([fp], lr=0.5)
    for step in range(8):
        opt.zero_grad()
        dist = wav2vecdist(sine(ft), sine(fp))
        dist.backward()
        opt.step()
print("fp after tuning", fp.item(), "conv grad norm",
      model.feature_extractor.conv_layers[0][0].weight.grad.norm().item())
