"""BalancingGroups get_bert_optim puts the bias and LayerNorm.weight parameters, the ones meant to be exempt, in the weight-decay group.

source: https://github.com/facebookresearch/BalancingGroups/issues/6
kind: bug
symptom: silent
verified: the decay group holds the 4 bias/LayerNorm tensors and the no-decay group the 3 weight matrices (embeddings included); after 5 AdamW steps (lr 1e-3, weight_decay 0.5) LayerNorm.weight differs by 2.5e-3 and the word embeddings by 1.0e-2 (max abs) from the same training with the groups the right way round
"""
import torch
import torch.nn.functional as F
from torch.optim import AdamW


class TinyBert(torch.nn.Module):
    def __init__(self, vocab=50, hidden=16, num_labels=2):
        super().__init__()
        self.word_embeddings = torch.nn.Embedding(vocab, hidden)
        self.dense = torch.nn.Linear(hidden, hidden)
        self.LayerNorm = torch.nn.LayerNorm(hidden)
        self.classifier = torch.nn.Linear(hidden, num_labels)

    def forward(self, input_ids, attention_mask):
        h = self.word_embeddings(input_ids) * attention_mask.unsqueeze(-1)
        h = self.LayerNorm(h + torch.tanh(self.dense(h)))
        return self.classifier(h[:, 0])


class BertWrapper(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(input_ids=x[:, :, 0], attention_mask=x[:, :, 1])


def get_bert_optim(network, lr, weight_decay):
    no_decay = ["bias", "LayerNorm.weight"]
    decay_params = []
    nodecay_params = []
    for n, p in network.named_parameters():
        if any(nd in n for nd in no_decay):
            decay_params.append(p)  # ROOT
        else:
            nodecay_params.append(p)
    optimizer_grouped_parameters = [
        {"params": decay_params, "weight_decay": weight_decay},
        {"params": nodecay_params, "weight_decay": 0.0},
    ]
    return AdamW(optimizer_grouped_parameters, lr=lr, eps=1e-8)


torch.manual_seed(0)
network = BertWrapper(TinyBert())
optimizer = get_bert_optim(network, lr=1e-3, weight_decay=0.5)
x = torch.stack([torch.randint(0, 50, (8, 10)), torch.ones(8, 10, dtype=torch.long)], dim=-1)
y = torch.randint(0, 2, (8,))
for step in range(5):
    optimizer.zero_grad()
    loss = F.cross_entropy(network(x), y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(network.parameters(), 1.0)
    optimizer.step()
print([len(g["params"]) for g in optimizer.param_groups])
