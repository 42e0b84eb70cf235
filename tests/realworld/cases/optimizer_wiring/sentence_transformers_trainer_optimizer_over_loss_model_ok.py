"""SentenceTransformerTrainer after the fix (PR 2881): the optimizer's parameter groups are built from the loss model, which holds both the SentenceTransformer and SoftmaxLoss's classifier, so the classifier is trained with the encoder.

source: https://github.com/huggingface/sentence-transformers/issues/2872
kind: lookalike
"""
import torch
import torch.nn as nn


class SentenceTransformer(nn.Module):
    def __init__(self, vocab_size=100, dim=16):
        super().__init__()
        self.embeddings = nn.EmbeddingBag(vocab_size, dim, mode="mean")
        self.dim = dim

    def get_sentence_embedding_dimension(self):
        return self.dim

    def forward(self, input_ids):
        return self.embeddings(input_ids)


class SoftmaxLoss(nn.Module):
    def __init__(self, model, sentence_embedding_dimension, num_labels):
        super().__init__()
        self.model = model
        self.classifier = nn.Linear(3 * sentence_embedding_dimension, num_labels)
        self.loss_fct = nn.CrossEntropyLoss()

    def forward(self, sentence_features, labels):
        rep_a, rep_b = [self.model(f) for f in sentence_features]
        features = torch.cat([rep_a, rep_b, torch.abs(rep_a - rep_b)], dim=1)
        return self.loss_fct(self.classifier(features), labels)


class SentenceTransformerTrainer:
    def __init__(self, model, loss, learning_rate=1e-2, weight_decay=0.01):
        self.model, self.loss = model, loss
        self.learning_rate, self.weight_decay = learning_rate, weight_decay

    def create_optimizer(self):
        opt_model = self.loss
        decay_parameters = [n for n, _ in opt_model.named_parameters() if "bias" not in n]
        optimizer_grouped_parameters = [
            {"params": [p for n, p in opt_model.named_parameters() if n in decay_parameters and p.requires_grad],
             "weight_decay": self.weight_decay},
            {"params": [p for n, p in opt_model.named_parameters() if n not in decay_parameters and p.requires_grad],
             "weight_decay": 0.0},
        ]
        self.optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=self.learning_rate)
        return self.optimizer

    def train(self, batches):
        optimizer = self.create_optimizer()
        for sentence_features, labels in batches:
            loss = self.loss(sentence_features, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


torch.manual_seed(0)
model = SentenceTransformer()
softmax_loss = SoftmaxLoss(model, model.get_sentence_embedding_dimension(), 3)
start = softmax_loss.classifier.weight.detach().clone()
batches = [((torch.randint(0, 100, (32, 6)), torch.randint(0, 100, (32, 6))), torch.randint(0, 3, (32,))) for _ in range(40)]
trainer = SentenceTransformerTrainer(model, softmax_loss)
trainer.train(batches)
held = sum(len(g["params"]) for g in trainer.optimizer.param_groups)
print("optimizer tensors", held, "classifier moved", (softmax_loss.classifier.weight - start).norm().item(),
      "grad", softmax_loss.classifier.weight.grad.norm().item())
