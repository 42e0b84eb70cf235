"""BEATs TransformerEncoder.extract_features: pos_conv saves its input x.transpose(1, 2), a view of x, and x += x_conv then writes into x, so backward through the positional convolution finds its saved input modified.

source: https://github.com/microsoft/unilm/pull/999
kind: bug
symptom: crash
verified: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class SamePad(nn.Module):
    def __init__(self, kernel_size):
        super().__init__()
        self.remove = 1 if kernel_size % 2 == 0 else 0

    def forward(self, x):
        if self.remove > 0:
            x = x[:, :, : -self.remove]
        return x


class TransformerEncoder(nn.Module):
    def __init__(self, embedding_dim=32, conv_pos=16, conv_pos_groups=4, layers=2, dropout=0.1):
        super().__init__()
        self.dropout = dropout
        self.embedding_dim = embedding_dim
        pos_conv = nn.Conv1d(embedding_dim, embedding_dim, kernel_size=conv_pos, padding=conv_pos // 2, groups=conv_pos_groups)
        self.pos_conv = nn.Sequential(pos_conv, SamePad(conv_pos), nn.GELU())
        self.layers = nn.ModuleList([nn.TransformerEncoderLayer(embedding_dim, 4, 64, dropout) for _ in range(layers)])
        self.layer_norm = nn.LayerNorm(embedding_dim)

    def forward(self, x, padding_mask=None):
        return self.extract_features(x, padding_mask)

    def extract_features(self, x, padding_mask=None):
        x_conv = self.pos_conv(x.transpose(1, 2))
        x_conv = x_conv.transpose(1, 2)
        x += x_conv  # ROOT
        x = self.layer_norm(x)
        x = F.dropout(x, p=self.dropout, training=self.training)
        x = x.transpose(0, 1)
        for layer in self.layers:
            x = layer(x)
        return x.transpose(0, 1)


class BEATs(nn.Module):
    def __init__(self, embed=32):
        super().__init__()
        self.patch_embedding = nn.Conv2d(1, embed, kernel_size=4, stride=4, bias=False)
        self.layer_norm = nn.LayerNorm(embed)
        self.dropout_input = nn.Dropout(0.1)
        self.encoder = TransformerEncoder(embed)

    def extract_features(self, fbank):
        features = self.patch_embedding(fbank.unsqueeze(1))
        features = features.reshape(features.shape[0], features.shape[1], -1).transpose(1, 2)
        features = self.layer_norm(features)
        x = self.dropout_input(features)
        return self.encoder(x)


torch.manual_seed(0)
model = BEATs()
classifier = nn.Linear(32, 5)
optimizer = torch.optim.AdamW(list(model.parameters()) + list(classifier.parameters()), lr=1e-4)
for step in range(2):
    fbank, labels = torch.randn(2, 32, 16), torch.randint(0, 5, (2,))
    logits = classifier(model.extract_features(fbank).mean(dim=1))
    loss = F.cross_entropy(logits, labels)
    optimizer.zero_grad()
    loss.backward()  # SYMPTOM
    optimizer.step()
