"""enformer-pytorch builds its per-species output heads with `map_values(...)`, which returns a plain Python dict of `nn.Sequential` heads assigned to `self._heads`; the dict is not a submodule container, so the heads' Linear layers are missing from `model.parameters()` (and from `.to()`/`state_dict()`): training the model with Adam on a Poisson loss moves the trunk while the human and mouse heads keep their random initialisation.

source: https://github.com/lucidrains/enformer-pytorch/commit/1b929f945e44fd0f7fbe4049bd7f6f2df7d7ea98
kind: bug
symptom: silent
verified: parameters of the heads in model.parameters(): 0; after 5 Adam steps the human head's weights are unchanged while the trunk moved
"""
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)


def map_values(fn, d):
    return {key: fn(values) for key, values in d.items()}


class Residual(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x, **kwargs):
        return self.fn(x, **kwargs) + x


class GELU(nn.Module):
    def forward(self, x):
        return torch.sigmoid(1.702 * x) * x


class Transpose(nn.Module):
    def forward(self, x):
        return x.transpose(1, 2)


class TargetLengthCrop(nn.Module):
    def __init__(self, target_length):
        super().__init__()
        self.target_length = target_length

    def forward(self, x):
        seq_len, target_len = x.shape[-2], self.target_length
        trim = (seq_len - target_len) // 2
        return x[:, trim:trim + target_len] if trim > 0 else x


def ConvBlock(dim, dim_out=None, kernel_size=1):
    return nn.Sequential(nn.BatchNorm1d(dim), GELU(), nn.Conv1d(dim, dim_out or dim, kernel_size, padding=kernel_size // 2))


class Enformer(nn.Module):
    """Reduced: a 2-stage conv tower with max pooling and one pre-norm transformer block instead of 11."""

    def __init__(self, dim=32, heads=4, output_heads=dict(human=12, mouse=6), target_length=8, dropout_rate=0.1,
                 num_alphabet=5):
        super().__init__()
        half_dim = dim // 2
        twice_dim = dim * 2
        self.stem = nn.Sequential(Transpose(), nn.Conv1d(num_alphabet, half_dim, 15, padding=7),
                                  Residual(ConvBlock(half_dim)), nn.MaxPool1d(2))
        self.conv_tower = nn.Sequential(
            ConvBlock(half_dim, dim, kernel_size=5), Residual(ConvBlock(dim, dim, 1)), nn.MaxPool1d(2))
        self.transformer = nn.Sequential(
            Transpose(),
            Residual(nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim * 2), nn.Dropout(dropout_rate), nn.ReLU(),
                                   nn.Linear(dim * 2, dim), nn.Dropout(dropout_rate))))
        self.crop_final = TargetLengthCrop(target_length)
        self.final_pointwise = nn.Sequential(nn.Linear(dim, twice_dim, 1), nn.Dropout(dropout_rate / 8), GELU())
        self._trunk = nn.Sequential(self.stem, self.conv_tower, self.transformer, self.crop_final,
                                    self.final_pointwise)

        # create final heads for human and mouse
        self._heads = map_values(lambda features: nn.Sequential(  # ROOT
            nn.Linear(twice_dim, features, 1),
            nn.Softplus()
        ), output_heads)

    @property
    def trunk(self):
        return self._trunk

    @property
    def heads(self):
        return self._heads

    def forward(self, x, head=None):
        x = self._trunk(x)
        if head is not None:
            return self._heads[head](x)
        return map_values(lambda fn: fn(x), self._heads)


model = Enformer()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
head_params = {id(p) for h in model.heads.values() for p in h.parameters()}
print("parameters of the heads in model.parameters():", sum(id(p) in head_params for p in model.parameters()))
human_before = model.heads["human"][0].weight.detach().clone()
stem_before = model.stem[1].weight.detach().clone()
for step in range(5):
    seq = F.one_hot(torch.randint(0, 5, (2, 32)), num_classes=5).float()
    target = torch.rand(2, 8, 12)
    pred = model(seq, head="human")
    loss = F.poisson_nll_loss(pred, target, log_input=False)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step}: poisson loss {loss.item():.4f}")
print(f"human head changed: {not torch.equal(human_before, model.heads['human'][0].weight)}, "
      f"trunk changed: {not torch.equal(stem_before, model.stem[1].weight)}")
