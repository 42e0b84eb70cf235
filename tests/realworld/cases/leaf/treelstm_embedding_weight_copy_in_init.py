"""TreeLSTM: __init__ copies the GloVe vectors into self.emb.weight in place; with a trainable embedding this fails.

source: https://github.com/dasguptar/treelstm.pytorch/pull/26
kind: bug
symptom: crash
verified: RuntimeError: a leaf Variable that requires grad is being used in an in-place operation.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

PAD = 0


class SimilarityTreeLSTM(nn.Module):
    def __init__(self, vocab_size, in_dim, mem_dim, num_classes, sparsity, freeze, init_emb):
        super(SimilarityTreeLSTM, self).__init__()
        self.emb = nn.Embedding(vocab_size, in_dim, padding_idx=PAD, sparse=sparsity)
        if freeze:
            self.emb.weight.requires_grad = False
        self.emb.weight.copy_(init_emb)  # ROOT
        self.childsumtreelstm = nn.LSTM(in_dim, mem_dim, batch_first=True)
        self.similarity = nn.Linear(2 * mem_dim, num_classes)

    def forward(self, linputs, rinputs):
        lstate = self.childsumtreelstm(self.emb(linputs))[0][:, -1]
        rstate = self.childsumtreelstm(self.emb(rinputs))[0][:, -1]
        return F.log_softmax(self.similarity(torch.cat([lstate * rstate, (lstate - rstate).abs()], 1)), dim=1)


torch.manual_seed(0)
emb = torch.randn(20, 6)
model = SimilarityTreeLSTM(20, 6, 8, 5, sparsity=False, freeze=False, init_emb=emb)
optimizer = torch.optim.Adagrad(filter(lambda p: p.requires_grad, model.parameters()), lr=0.01)
ltree, rtree, target = torch.randint(1, 20, (2, 4)), torch.randint(1, 20, (2, 4)), torch.tensor([1, 3])
loss = F.kl_div(model(ltree, rtree), F.one_hot(target, 5).float(), reduction='batchmean')
loss.backward()
optimizer.step()
