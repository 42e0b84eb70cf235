"""PyText's word-tagging model with a CRF output layer after the fix: the emissions come from `forward` and the CRF transition matrix is used by the loss afterwards, and the model is wrapped in DistributedDataParallel with `find_unused_parameters=False`, so DDP expects a gradient for every parameter in the backward, the transition matrix's hook fires once and its gradient is all-reduced with the others.

source: https://github.com/facebookresearch/pytext/pull/497
kind: lookalike
launch: torchrun --nproc-per-node=2
"""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(1)
NUM_TAGS, VOCAB, DIM = 5, 40, 16


class CRF(nn.Module):
    def __init__(self, num_tags):
        super().__init__()
        self.transitions = nn.Parameter(torch.randn(num_tags, num_tags) * 0.1)

    def neg_log_likelihood(self, emissions, tags):
        batch, length, _ = emissions.shape
        score = emissions[:, 0].gather(1, tags[:, :1]).squeeze(1)
        alpha = emissions[:, 0]
        for t in range(1, length):
            score = score + self.transitions[tags[:, t - 1], tags[:, t]]
            score = score + emissions[:, t].gather(1, tags[:, t:t + 1]).squeeze(1)
            alpha = torch.logsumexp(alpha.unsqueeze(2) + self.transitions + emissions[:, t].unsqueeze(1), dim=1)
        return (torch.logsumexp(alpha, dim=1) - score).mean()


class WordTaggingModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, DIM)
        self.encoder = nn.LSTM(DIM, DIM, batch_first=True)
        self.decoder = nn.Linear(DIM, NUM_TAGS)
        self.output_layer = CRF(NUM_TAGS)

    def forward(self, tokens):
        hidden, _ = self.encoder(self.embedding(tokens))
        return self.decoder(hidden)  # emissions only: the CRF is used by the loss

    def get_loss(self, emissions, tags):
        return self.output_layer.neg_log_likelihood(emissions, tags)


def wrap_for_distributed(model):
    return nn.parallel.DistributedDataParallel(model, find_unused_parameters=False)


def train(model, steps=3):
    ddp_model = wrap_for_distributed(model)
    optimizer = torch.optim.Adam(ddp_model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(dist.get_rank())
    for step in range(steps):
        tokens = torch.randint(0, VOCAB, (8, 12), generator=g)
        tags = tokens % NUM_TAGS
        emissions = ddp_model(tokens)
        loss = ddp_model.module.get_loss(emissions, tags)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if dist.get_rank() == 0:
            print(f"step {step}: loss {loss.item():.4f}")


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    train(WordTaggingModel())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
