"""A replication of the Embedded Topic Model (ETM) decides in `reparameterize` whether to sample the topic proportions with `if self.train():` instead of `if self.training:`. `Module.train()` is a setter: it switches the whole model back to training mode and returns the module, which is always true, so every forward samples the latent noise, also in the evaluation that called `model.eval()` first; the held-out perplexity comes from a random draw and differs from run to run, and the model leaves evaluation in training mode.

source: https://github.com/hanhluukim/replication-topic-modelling-in-embedding-space/commit/1867bed9ab0c56c243beaa59993a805a1e2d9a2f
kind: bug
symptom: silent
verified: two evaluations of the same held-out documents under `model.eval()` and `torch.no_grad()` give perplexities 9.060 and 9.043 (identical: False) and `model.training` is True after the evaluation; in the look-alike both give 8.797 (identical: True) and `model.training` stays False
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_num_threads(1)

VOCAB, TOPICS, EMB, HIDDEN = 60, 4, 8, 32


class ETM(nn.Module):
    def __init__(self):
        super().__init__()
        self.rho = nn.Linear(EMB, VOCAB, bias=False)  # word embeddings
        self.alphas = nn.Linear(EMB, TOPICS, bias=False)  # topic embeddings
        self.q_theta = nn.Sequential(nn.Linear(VOCAB, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU())
        self.mu_q_theta = nn.Linear(HIDDEN, TOPICS)
        self.logsigma_q_theta = nn.Linear(HIDDEN, TOPICS)

    def reparameterize(self, mu, logvar):
        if self.train():  # ROOT
            std = torch.exp(0.5 * logvar)
            eps = torch.randn_like(std)
            return eps.mul_(std).add_(mu)
        else:
            return mu

    def encode(self, normalized_bows):
        q = self.q_theta(normalized_bows)
        mu, logsigma = self.mu_q_theta(q), self.logsigma_q_theta(q)
        kl = -0.5 * torch.sum(1 + logsigma - mu.pow(2) - logsigma.exp(), dim=-1).mean()
        return mu, logsigma, kl

    def get_beta(self):
        return F.softmax(self.alphas(self.rho.weight), dim=0).transpose(1, 0)  # topics x vocab

    def forward(self, normalized_bows):
        mu, logsigma, kl = self.encode(normalized_bows)
        theta = F.softmax(self.reparameterize(mu, logsigma), dim=-1)
        preds = torch.log(torch.mm(theta, self.get_beta()) + 1e-6)
        return preds, kl


def make_corpus(n_docs, g):
    topics = F.softmax(torch.randn(TOPICS, VOCAB, generator=g) * 3, dim=-1)
    mix = torch.distributions.Dirichlet(torch.full((TOPICS,), 0.3)).sample((n_docs,))
    probs = mix @ topics
    return torch.stack([torch.bincount(torch.multinomial(p, 50, replacement=True, generator=g), minlength=VOCAB)
                        for p in probs]).float()


def train(model, bows, epochs=40):
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    for epoch in range(epochs):
        model.train()
        for batch in bows.split(32):
            preds, kl = model(batch / batch.sum(1, keepdim=True))
            loss = -(preds * batch).sum(1).mean() + kl
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


def evaluate_perplexity(model, bows):
    model.eval()
    with torch.no_grad():
        preds, _ = model(bows / bows.sum(1, keepdim=True))
        nll = -(preds * bows).sum() / bows.sum()
    return torch.exp(nll).item()


g = torch.Generator().manual_seed(0)
corpus = make_corpus(300, g)
train_docs, test_docs = corpus[:256], corpus[256:]
model = ETM()
train(model, train_docs)
first = evaluate_perplexity(model, test_docs)
second = evaluate_perplexity(model, test_docs)
print(f"held-out perplexity: {first:.3f} then {second:.3f} (identical: {first == second})")
print("model.training after evaluation:", model.training)
