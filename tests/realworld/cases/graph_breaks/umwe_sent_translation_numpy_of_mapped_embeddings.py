"""UMWE evaluator: sent_translation passes the mapped embeddings, the output of the trainable mapping with its graph, to get_sent_translation_accuracy, which converts them with emb2.cpu().numpy() (code left over from before PyTorch 0.4's merge of Variable and Tensor).

source: https://github.com/ccsasuke/umwe/issues/5
kind: bug
symptom: crash
verified: Can't call numpy() on Tensor that requires grad
"""
import numpy as np
import torch
import torch.nn as nn


def get_sent_translation_accuracy(data, lg1, word2id1, emb1, lg2, word2id2, emb2, n_keys=4, n_queries=3, method='nn'):
    emb1 = emb1.cpu().numpy()
    emb2 = emb2.cpu().numpy()  # SYMPTOM
    sent1 = [emb1[[word2id1[w] for w in s]].mean(0) for s in data[lg1]]
    sent2 = [emb2[[word2id2[w] for w in s]].mean(0) for s in data[lg2]]
    keys = np.stack(sent2[:n_keys])
    queries = np.stack(sent1[:n_queries])
    scores = queries @ keys.T
    return 100 * np.mean(scores.argmax(1) == np.arange(n_queries))


class Evaluator(object):
    def __init__(self, trainer):
        self.embs = trainer.embs
        self.mappings = trainer.mappings
        self.word2id = trainer.word2id
        self.data = trainer.europarl

    def sent_translation(self, to_log, src_lang='de', tgt_lang='en'):
        src_emb = self.mappings[src_lang](self.embs[src_lang].weight).data
        tgt_emb = self.mappings[tgt_lang](self.embs[tgt_lang].weight)  # ROOT
        to_log['sent-%s-%s-nn' % (src_lang, tgt_lang)] = get_sent_translation_accuracy(
            self.data, src_lang, self.word2id[src_lang], src_emb, tgt_lang, self.word2id[tgt_lang], tgt_emb)


class Trainer(object):
    def __init__(self, vocab=20, dim=8):
        self.embs = {lg: nn.Embedding(vocab, dim) for lg in ('de', 'en')}
        for emb in self.embs.values():
            emb.weight.requires_grad = False
        self.mappings = {lg: nn.Linear(dim, dim, bias=False) for lg in ('de', 'en')}
        self.word2id = {lg: {'w%d' % i: i for i in range(vocab)} for lg in ('de', 'en')}
        self.europarl = {lg: [['w%d' % ((i * 3 + j) % vocab) for j in range(4)] for i in range(5)] for lg in ('de', 'en')}


torch.manual_seed(0)
trainer = Trainer()
evaluator = Evaluator(trainer)
to_log = {}
evaluator.sent_translation(to_log)
print(to_log)
