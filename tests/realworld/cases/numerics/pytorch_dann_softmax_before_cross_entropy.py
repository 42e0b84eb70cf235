"""pytorch-DANN's Classifier and Discriminator end in nn.Softmax while the losses are nn.CrossEntropyLoss, which applies log-softmax itself: the loss sees probabilities in [0, 1] as logits, its gradients are squashed and the models barely train.

source: https://github.com/NaJaeMin92/pytorch-DANN/issues/7
kind: bug
symptom: silent
verified: after 15 epochs of 4 batches (SGD lr 0.01, momentum 0.9) on 10 separable source classes the class loss is still 2.295 (ln 10 = 2.303) and the source accuracy 0.18; without the final softmax layers (the maintainer's update) the loss is 0.778 and the accuracy 0.89
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ReverseLayerF(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.neg() * ctx.alpha, None


class Extractor(nn.Module):
    def __init__(self):
        super(Extractor, self).__init__()
        self.extractor = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU())

    def forward(self, x):
        return self.extractor(x)


class Classifier(nn.Module):
    def __init__(self):
        super(Classifier, self).__init__()
        self.classifier = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 10), nn.Softmax(dim=1))  # ROOT

    def forward(self, x):
        return self.classifier(x)


class Discriminator(nn.Module):
    def __init__(self):
        super(Discriminator, self).__init__()
        self.discriminator = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 2), nn.Softmax(dim=1))

    def forward(self, input_feature, alpha):
        return self.discriminator(ReverseLayerF.apply(input_feature, alpha))


torch.manual_seed(0)
encoder, classifier, discriminator = Extractor(), Classifier(), Discriminator()
class_criterion, domain_criterion = nn.CrossEntropyLoss(), nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(list(encoder.parameters()) + list(classifier.parameters()) + list(discriminator.parameters()), lr=0.01, momentum=0.9)
centers = torch.randn(10, 20) * 2
source_labels = torch.randint(0, 10, (256,))
source_images = centers[source_labels] + torch.randn(256, 20)
target_images = centers[torch.randint(0, 10, (256,))] + torch.randn(256, 20) + 0.5
for epoch in range(15):
    for i in range(0, 256, 64):
        src, lbl, tgt = source_images[i:i + 64], source_labels[i:i + 64], target_images[i:i + 64]
        combined_feature = encoder(torch.cat((src, tgt), 0))
        class_pred = classifier(combined_feature[:64])
        class_loss = class_criterion(class_pred, lbl)
        domain_pred = discriminator(combined_feature, alpha=0.1)
        domain_labels = torch.cat((torch.zeros(64), torch.ones(64))).long()
        domain_loss = domain_criterion(domain_pred, domain_labels)
        total_loss = class_loss + domain_loss
        optimizer.zero_grad()
        total_loss.backward()
        optimizer.step()
with torch.no_grad():
    acc = (classifier(encoder(source_images)).argmax(1) == source_labels).float().mean().item()
print(epoch, class_loss.item(), acc)
