"""Label probabilities from softmax, then -torch.log(probs) * labels: an absolute-zero probability gives NaN.

source: https://github.com/allenai/allennlp/issues/2797
kind: bug
symptom: silent
verified: loss is nan (0 * inf) and every classifier gradient is nan
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
classifier = nn.Linear(4, 3)
with torch.no_grad():
    classifier.weight.mul_(200)
features = torch.randn(2, 4) * 3
labels = torch.nn.functional.one_hot(torch.tensor([0, 2]), 3)

label_logits_squeezed = classifier(features)
label_probs = torch.nn.functional.softmax(label_logits_squeezed, dim=-1)
log_label_probs = -torch.log(label_probs)  # ROOT
loss = log_label_probs * labels.float()
loss = torch.sum(loss)
loss.backward()
print(label_probs, loss, classifier.weight.grad)
