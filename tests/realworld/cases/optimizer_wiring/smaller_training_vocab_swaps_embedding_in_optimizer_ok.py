"""transformer-smaller-training-vocab's `reduce_train_vocab` after the PR: it takes the optimizer that was created beforehand and, when it installs the reduced `nn.Embedding`, puts the new embedding Parameter into the param group that held the old one (and swaps it back on exit), so the embeddings are trained and the trained rows are written back into the full matrix.

source: https://github.com/helpmefindaname/transformer-smaller-training-vocab/pull/3
kind: lookalike
"""
import zlib
from contextlib import contextmanager

import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

VOCAB, DIM = 200, 16


class Tokenizer:
    def __init__(self):
        self.mapping = None

    def __call__(self, text):
        ids = [zlib.crc32(word.encode()) % VOCAB for word in text.split()]
        if self.mapping is not None:
            ids = [self.mapping[i] for i in ids]
        return torch.tensor(ids)


class TinyClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embeddings = nn.Embedding(VOCAB, DIM)
        self.encoder = nn.Sequential(nn.Linear(DIM, DIM), nn.Tanh())
        self.head = nn.Linear(DIM, 2)

    def get_input_embeddings(self):
        return self.embeddings

    def set_input_embeddings(self, embeddings):
        self.embeddings = embeddings

    def forward(self, ids):
        return self.head(self.encoder(self.embeddings(ids).mean(dim=0)))


def swap_optimizer_param(optimizer, old, new):
    for group in optimizer.param_groups:
        group["params"] = [new if p is old else p for p in group["params"]]
    optimizer.state.pop(old, None)


@contextmanager
def reduce_train_vocab(model, tokenizer, texts, optimizer=None):
    used = sorted({i for text in texts for i in Tokenizer()(text).tolist()})
    full = model.get_input_embeddings()
    reduced = nn.Embedding(len(used), DIM)
    reduced.weight.data.copy_(full.weight.data[used])
    model.set_input_embeddings(reduced)
    if optimizer is not None:
        swap_optimizer_param(optimizer, full.weight, reduced.weight)
    tokenizer.mapping = {old: new for new, old in enumerate(used)}
    try:
        yield
    finally:
        full.weight.data[used] = reduced.weight.data
        model.set_input_embeddings(full)
        if optimizer is not None:
            swap_optimizer_param(optimizer, reduced.weight, full.weight)
        tokenizer.mapping = None


def train_with_optimizer(model, tokenizer, optimizer, texts, labels, epochs=15):
    for _ in range(epochs):
        for text, label in zip(texts, labels):
            logits = model(tokenizer(text)).unsqueeze(0)
            loss = nn.functional.cross_entropy(logits, torch.tensor([label]))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


def main():
    words = [f"w{i}" for i in range(40)]
    texts = [" ".join(words[j] for j in torch.randint(0, 40, (6,)).tolist()) for _ in range(12)]
    labels = [i % 2 for i in range(12)]
    model, tokenizer = TinyClassifier(), Tokenizer()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    used = sorted({i for text in texts for i in tokenizer(text).tolist()})
    emb_before = model.embeddings.weight.detach()[used].clone()
    enc_before = model.encoder[0].weight.detach().clone()
    with reduce_train_vocab(model=model, tokenizer=tokenizer, texts=texts, optimizer=optimizer):
        train_with_optimizer(model, tokenizer, optimizer, texts, labels)
    print("embedding change:", round((model.embeddings.weight.detach()[used] - emb_before).norm().item(), 4))
    print("encoder change:", round((model.encoder[0].weight.detach() - enc_before).norm().item(), 4))


if __name__ == "__main__":
    main()
