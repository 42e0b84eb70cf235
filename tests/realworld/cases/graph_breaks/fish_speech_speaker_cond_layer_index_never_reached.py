"""fish-speech's RelativePositionTransformer adds the speaker embedding at layer `i == self.speaker_cond_layer - 1`; with the config's speaker_cond_layer: 0 that index is -1, the loop never reaches it, and the speaker encoder and the cond projection never get a gradient: the VQ-diffusion model trains without speaker conditioning.

source: https://github.com/fishaudio/fish-speech/commit/9b916b1c38433dda3a4cb9595dadea592c6f3341
kind: bug
symptom: silent
verified: after 3 steps every speaker_encoder.* and encoder.cond.* parameter has grad None and max change 0.0, while the transformer layers move (max change about 3e-4)
"""
import torch
from torch import nn
from torch.nn import functional as F


class LayerNorm(nn.Module):  # fish_speech.models.vqgan.modules.normalization: over the channel dim
    def __init__(self, channels, eps=1e-5):
        super().__init__()
        self.gamma, self.beta, self.eps = nn.Parameter(torch.ones(channels)), nn.Parameter(torch.zeros(channels)), eps

    def forward(self, x):
        return F.layer_norm(x.mT, (x.shape[1],), self.gamma, self.beta, self.eps).mT


class MultiHeadAttention(nn.Module):  # relative positions left out
    def __init__(self, channels, out_channels, n_heads, p_dropout=0.0, window_size=None):
        super().__init__()
        self.attn = nn.MultiheadAttention(channels, n_heads, dropout=p_dropout, batch_first=True)
        self.conv_o = nn.Conv1d(channels, out_channels, 1)

    def forward(self, x, c, attn_mask=None):
        y, _ = self.attn(x.mT, c.mT, c.mT, need_weights=False)
        return self.conv_o(y.mT)


class FFN(nn.Module):
    def __init__(self, in_channels, out_channels, filter_channels, kernel_size, p_dropout=0.0):
        super().__init__()
        self.conv_1, self.conv_2 = nn.Conv1d(in_channels, filter_channels, kernel_size), nn.Conv1d(filter_channels, out_channels, kernel_size)

    def forward(self, x, x_mask):
        return self.conv_2(torch.relu(self.conv_1(x * x_mask))) * x_mask


class RelativePositionTransformer(nn.Module):
    def __init__(self, in_channels, hidden_channels, out_channels, hidden_channels_ffn, n_heads, n_layers,
                 kernel_size=1, dropout=0.0, window_size=4, gin_channels=0, speaker_cond_layer=0):
        super().__init__()
        self.n_layers = n_layers
        self.speaker_cond_layer = speaker_cond_layer
        self.drop = nn.Dropout(dropout)
        self.attn_layers, self.norm_layers_1 = nn.ModuleList(), nn.ModuleList()
        self.ffn_layers, self.norm_layers_2 = nn.ModuleList(), nn.ModuleList()
        for i in range(self.n_layers):
            self.attn_layers.append(MultiHeadAttention(hidden_channels if i != 0 else in_channels, hidden_channels,
                                                       n_heads, p_dropout=dropout, window_size=window_size))
            self.norm_layers_1.append(LayerNorm(hidden_channels))
            self.ffn_layers.append(FFN(hidden_channels, hidden_channels, hidden_channels_ffn, kernel_size, p_dropout=dropout))
            self.norm_layers_2.append(LayerNorm(hidden_channels))
        if gin_channels != 0:
            self.cond = nn.Linear(gin_channels, hidden_channels)

    def forward(self, x, x_mask, g=None):
        attn_mask = x_mask.unsqueeze(2) * x_mask.unsqueeze(-1)
        x = x * x_mask
        for i in range(self.n_layers):
            if i == self.speaker_cond_layer - 1 and g is not None:  # ROOT
                x = x + self.cond(g.mT).mT
                x = x * x_mask
            y = self.attn_layers[i](x, x, attn_mask)
            y = self.drop(y)
            x = self.norm_layers_1[i](x + y)
            y = self.ffn_layers[i](x, x_mask)
            y = self.drop(y)
            x = self.norm_layers_2[i](x + y)
        return x * x_mask


torch.manual_seed(0)
speaker_encoder = nn.Sequential(nn.Conv1d(20, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool1d(1))  # mel -> g (B, 32, 1)
encoder = RelativePositionTransformer(16, 16, 16, 32, n_heads=2, n_layers=4, gin_channels=32, speaker_cond_layer=0)
model = nn.ModuleDict({"speaker_encoder": speaker_encoder, "encoder": encoder})
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
before = {n: p.detach().clone() for n, p in model.named_parameters()}
for step in range(3):
    features, mels, x_mask = torch.randn(2, 16, 10), torch.randn(2, 20, 10), torch.ones(2, 1, 10)
    target = torch.randn(2, 16, 10)  # stands for the diffusion target
    g = speaker_encoder(mels)
    loss = F.mse_loss(encoder(features, x_mask, g=g), target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
for prefix in ("speaker_encoder.", "encoder.cond.", "encoder.attn_layers.", "encoder.ffn_layers."):
    params = [(n, p) for n, p in model.named_parameters() if n.startswith(prefix)]
    print(prefix, "grad None" if all(p.grad is None for _, p in params) else "grad ok",
          "max change", round(max((p.detach() - before[n]).abs().max().item() for n, p in params), 6))
