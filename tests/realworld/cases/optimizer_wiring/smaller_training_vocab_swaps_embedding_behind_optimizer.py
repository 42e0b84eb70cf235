"""transformer-smaller-training-vocab's `reduce_train_vocab` context manager shrinks a model's word-embedding matrix to the tokens that occur in the training texts: on entry it installs a new, smaller `nn.Embedding` (a new Parameter) and remaps the tokenizer, on exit it writes the trained rows back into the full matrix. An optimizer created beforehand still holds the old full embedding Parameter, which no longer takes part in the forward pass, so the embeddings are never updated during training and the rows written back on exit are the untouched originals, with no error.

source: https://github.com/helpmefindaname/transformer-smaller-training-vocab/pull/3
kind: bug
symptom: silent
verified: after training inside the context manager the full embedding rows of the used tokens have not moved (embedding change: 0.0) while the encoder has (encoder change: 3.9435); the look-alike (optimizer passed to the context manager, its param group updated) moves them (embedding change: 5.1172)
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


@contextmanager
def reduce_train_vocab(model, tokenizer, texts, optimizer=None):
    used = sorted({i for text in texts for i in Tokenizer()(text).tolist()})
    full = model.get_input_embeddings()
    reduced = nn.Embedding(len(used), DIM)
    reduced.weight.data.copy_(full.weight.data[used])
    model.set_input_embeddings(reduced)  # ROOT
    tokenizer.mapping = {old: new for new, old in enumerate(used)}
    try:
        yield
    finally:
        full.weight.data[used] = reduced.weight.data
        model.set_input_embeddings(full)
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
