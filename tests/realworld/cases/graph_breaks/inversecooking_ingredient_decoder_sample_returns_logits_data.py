"""inversecooking's DecoderTransformer.sample returns torch.stack(logits, 1).data; InverseCookingModel.forward builds the ingredient, eos and cardinality losses from those sampled logits, so when only the ingredient decoder is trained (ingrs_only) the total loss has no grad_fn and loss.backward() fails.

source: https://github.com/facebookresearch/inversecooking/issues/3
kind: bug
symptom: crash
verified: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
import torch.nn as nn


def label2onehot(labels, pad_value):
    one_hot = torch.zeros(labels.size(0), labels.size(1), pad_value + 1).scatter_(2, labels.unsqueeze(2), 1)
    one_hot, _ = one_hot.max(dim=1)
    one_hot = one_hot[:, :-1]
    one_hot[:, 0] = 0
    return one_hot


def mask_from_eos(ids, eos_value):
    mask, mask_aux = torch.ones(ids.size()), torch.ones(ids.size(0))
    for idx in range(1, ids.size(1)):
        mask_aux = mask_aux * (ids[:, idx] != eos_value)
        mask[:, idx] = mask[:, idx] * mask_aux
    return mask


class DecoderTransformer(nn.Module):  # the transformer layers reduced to embedding + image conditioning + output layer
    def __init__(self, embed_size, vocab_size, seq_length):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab_size, embed_size)
        self.linear = nn.Linear(embed_size, vocab_size-1)
        self.seq_length = seq_length

    def forward(self, captions, img_features):
        x = self.embed_tokens(captions[:, -1]) + img_features.mean(1)
        return self.linear(torch.tanh(x)).unsqueeze(1), None

    def sample(self, img_features, first_token_value=0):
        sampled_ids = [torch.ones(img_features.size(0)).long() * first_token_value]
        logits = []
        for i in range(self.seq_length):
            outputs, _ = self.forward(torch.stack(sampled_ids, 1), img_features)
            outputs = outputs.squeeze(1)
            logits.append(outputs)
            _, predicted = torch.nn.functional.softmax(outputs, dim=-1).max(1)
            sampled_ids.append(predicted.detach())
        sampled_ids = torch.stack(sampled_ids[1:], 1)
        logits = torch.stack(logits, 1).data  # ROOT
        return sampled_ids, logits


class InverseCookingModel(nn.Module):
    def __init__(self, embed_size=16, ingr_vocab_size=12, maxnumlabels=5):
        super().__init__()
        self.image_encoder = nn.Linear(32, embed_size)  # stands for EncoderCNN over ResNet features
        self.ingredient_decoder = DecoderTransformer(embed_size, ingr_vocab_size, maxnumlabels)
        self.pad_value = ingr_vocab_size - 1
        self.crit_ingr, self.crit_eos = nn.BCELoss(reduction='none'), nn.BCELoss(reduction='none')

    def forward(self, img_inputs, target_ingrs):
        img_features = self.image_encoder(img_inputs)
        target_one_hot = label2onehot(target_ingrs, self.pad_value)
        ingr_ids, ingr_logits = self.ingredient_decoder.sample(img_features, first_token_value=0)
        ingr_logits = torch.nn.functional.softmax(ingr_logits, dim=-1)
        eos = ingr_logits[:, :, 0]
        target_eos = ((target_ingrs == 0) ^ (target_ingrs == self.pad_value))
        mask_perminv = mask_from_eos(target_ingrs, eos_value=0)
        ingr_probs, _ = torch.max(ingr_logits * mask_perminv.unsqueeze(-1), dim=1)
        losses = {'ingr_loss': self.crit_ingr(ingr_probs, target_one_hot).mean(-1),
                  'card_penalty': torch.abs((ingr_probs * target_one_hot).sum(1) - target_one_hot.sum(1))
                  + torch.abs((ingr_probs * (1 - target_one_hot)).sum(1)),
                  'eos_loss': (self.crit_eos(eos, target_eos.float())).mean(1)}
        return losses  # ingrs_only: the recipe decoder is not run


torch.manual_seed(0)
model = InverseCookingModel()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
loss_weight = [0.0, 1000.0, 1.0, 1.0]
for i in range(2):
    img_inputs = torch.randn(4, 7, 32)
    target_ingrs = torch.tensor([[3, 5, 0, 11, 11], [2, 0, 11, 11, 11], [4, 6, 8, 0, 11], [1, 9, 0, 11, 11]])
    losses = model(img_inputs, target_ingrs)
    loss = loss_weight[1] * losses['ingr_loss'].mean() + loss_weight[2] * losses['eos_loss'].mean() \
        + loss_weight[3] * losses['card_penalty'].mean()
    model.zero_grad()
    loss.backward()  # SYMPTOM
    optimizer.step()
    print("step", i, "loss", round(loss.item(), 4))
