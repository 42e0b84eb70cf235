"""A Show-Attend-Tell captioning trainer calls `decoder.train()` once, before its epoch loop; the BLEU validator run at the end of each epoch decodes with the decoder's `greedy_decoding`, which switches the decoder to eval mode (`self.eval()`) and never switches it back, so from the second epoch on the decoder trains with its dropout off, silently.

source: https://github.com/wiktorlazarski/Image-Captioning-with-Visual-Attention/commit/7bbc59c6802f53a4be5ead33898478cecc0286e6
kind: bug
symptom: silent
verified: training steps run with the decoder in training mode (dropout on): 6 of 18 (epochs 2 and 3 run in eval mode); the look-alike runs 18 of 18
"""
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

VOCAB, SOS, EOS = 30, 1, 2


class LSTMDecoder(nn.Module):
    def __init__(self, feature_dim=16, embed_dim=12, hidden=24, dropout=0.5):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, embed_dim)
        self.attn = nn.Linear(feature_dim + hidden, 1)
        self.init_h = nn.Linear(feature_dim, hidden)
        self.cell = nn.LSTMCell(embed_dim + feature_dim, hidden)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(hidden, VOCAB)

    def step(self, token, feature_maps, h, c):
        scores = self.attn(torch.cat([feature_maps, h[:, None].expand(-1, feature_maps.size(1), -1)], -1))
        context = (scores.softmax(1) * feature_maps).sum(1)
        h, c = self.cell(torch.cat([self.embed(token), context], -1), (h, c))
        return self.out(self.dropout(h)), h, c

    def forward(self, feature_maps, captions):
        h = torch.tanh(self.init_h(feature_maps.mean(1)))
        c = torch.zeros_like(h)
        logits = []
        for t in range(captions.size(1) - 1):
            step_logits, h, c = self.step(captions[:, t], feature_maps, h, c)
            logits.append(step_logits)
        return torch.stack(logits, 1)

    def greedy_decoding(self, feature_maps, max_length=8):
        self.eval()
        with torch.no_grad():
            h = torch.tanh(self.init_h(feature_maps.mean(1)))
            c = torch.zeros_like(h)
            token, sequence = torch.full((feature_maps.size(0),), SOS), []
            for _ in range(max_length):
                step_logits, h, c = self.step(token, feature_maps, h, c)
                token = step_logits.argmax(-1)
                sequence.append(token)
        return torch.stack(sequence, 1)


class CocoValidator:
    def validate(self, decoder, images, captions):
        predicted = decoder.greedy_decoding(images)
        return (predicted[:, :captions.size(1) - 1] == captions[:, 1:]).float().mean().item()


class Trainer:
    def __init__(self):
        self.validator = CocoValidator()
        self.steps_in_train_mode = 0

    def train(self, decoder, batches, val, num_epochs=3):
        optimizer = torch.optim.Adam(decoder.parameters(), lr=1e-3)
        decoder.train()  # ROOT
        for epoch in range(1, num_epochs + 1):
            for feature_maps, captions in batches:
                self.steps_in_train_mode += decoder.training
                logits = decoder(feature_maps, captions)
                loss = F.cross_entropy(logits.reshape(-1, VOCAB), captions[:, 1:].reshape(-1))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            score = self.validator.validate(decoder, *val)
            print(f"epoch {epoch}: loss {loss.item():.3f}, token accuracy {score:.3f}")


batches = [(torch.randn(4, 9, 16), torch.randint(3, VOCAB, (4, 7))) for _ in range(6)]
val = (torch.randn(4, 9, 16), torch.randint(3, VOCAB, (4, 7)))
trainer = Trainer()
trainer.train(LSTMDecoder(), batches, val)
print(f"training steps run with the decoder in training mode: {trainer.steps_in_train_mode} of {3 * len(batches)}")
