"""MatchingNetwork's AttentionalClassify already returns a softmax-weighted mixture of the support labels (probabilities), and the loss passes it to F.cross_entropy, which applies log_softmax again.

source: https://github.com/gitabcworld/MatchingNetworks/issues/5
kind: bug
symptom: silent
verified: for a perfect attention (the right class has probability 1) the loss is still 0.90 (5-way) instead of 0.0; on a random episode the gradient reaching the target embeddings differs from that of nll_loss(log(preds)) by 0.035 (max abs; that gradient is 0.048 at most)
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class DistanceNetwork(nn.Module):
    def forward(self, support_set, input_image):
        eps = 1e-10
        similarities = []
        for support_image in support_set:
            sum_support = torch.sum(torch.pow(support_image, 2), 1)
            support_magnitude = sum_support.clamp(eps, float("inf")).rsqrt()
            dot_product = input_image.unsqueeze(1).bmm(support_image.unsqueeze(2)).squeeze()
            similarities.append(dot_product * support_magnitude)
        return torch.stack(similarities)


class AttentionalClassify(nn.Module):
    def forward(self, similarities, support_set_y):
        softmax = nn.Softmax(dim=1)
        softmax_similarities = softmax(similarities)
        return softmax_similarities.unsqueeze(1).bmm(support_set_y).squeeze()


class MatchingNetwork(nn.Module):
    def __init__(self, in_dim=20, emb_dim=16):
        super().__init__()
        self.g = nn.Sequential(nn.Linear(in_dim, 32), nn.ReLU(), nn.Linear(32, emb_dim))
        self.dn = DistanceNetwork()
        self.classify = AttentionalClassify()

    def forward(self, support_set_images, support_set_labels_one_hot, target_image, target_label):
        encoded_images = [self.g(support_set_images[:, i]) for i in range(support_set_images.size(1))]
        gen_encode = self.g(target_image)
        similarities = self.dn(support_set=encoded_images, input_image=gen_encode)
        similarities = similarities.t()
        preds = self.classify(similarities, support_set_y=support_set_labels_one_hot)
        crossentropy_loss = F.cross_entropy(preds, target_label.long())  # ROOT
        return crossentropy_loss


torch.manual_seed(0)
batch, n_way, k_shot, in_dim = 8, 5, 1, 20
model = MatchingNetwork(in_dim)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
support_labels = torch.arange(n_way).repeat(batch, k_shot)
support_y = F.one_hot(support_labels, n_way).float()
for episode in range(5):
    support_x = torch.randn(batch, n_way * k_shot, in_dim)
    target_label = torch.randint(0, n_way, (batch,))
    target_x = support_x[torch.arange(batch), target_label] + 0.1 * torch.randn(batch, in_dim)
    loss = model(support_x, support_y, target_x, target_label)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
