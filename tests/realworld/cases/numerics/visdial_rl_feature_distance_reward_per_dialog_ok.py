"""visdial-rl train.py with the PR's fix: the MSE is kept per element (reduction 'none') and averaged over the feature dimension only, so each dialog of the batch gets its own reward.

source: https://github.com/batra-mlp-lab/visdial-rl/pull/12
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Categorical


class QBot(nn.Module):
    def __init__(self, imgFeatureSize=6, rnnHiddenSize=16, vocabSize=12):
        super().__init__()
        self.encoder = nn.GRUCell(imgFeatureSize, rnnHiddenSize)
        self.wordEmbed = nn.Embedding(vocabSize, imgFeatureSize)
        self.outNet = nn.Linear(rnnHiddenSize, vocabSize)
        self.featureNet = nn.Linear(rnnHiddenSize, imgFeatureSize)
        self.state = None
        self.saved_log_probs = []

    def observe(self, caption):
        self.state = self.encoder(caption, self.state)

    def forwardDecode(self):
        dist = Categorical(logits=self.outNet(self.state))
        token = dist.sample()
        self.saved_log_probs.append(dist.log_prob(token))
        return token

    def predictImage(self):
        return self.featureNet(self.state)

    def reinforce(self, reward):
        return -self.saved_log_probs[-1] * reward.detach()


torch.manual_seed(0)
qBot = QBot()
optimizer = torch.optim.Adam(qBot.parameters(), lr=1e-3)
mse_criterion = nn.MSELoss(reduction='none')
image, caption = torch.randn(4, 6), torch.randn(4, 6)
qBot.observe(caption)
prevFeatDist = torch.mean(mse_criterion(qBot.predictImage(), image), 1)
featLoss, rlLoss, rewards = 0, 0, []
for round in range(3):
    question = qBot.forwardDecode()
    qBot.observe(qBot.wordEmbed(question))
    predFeatures = qBot.predictImage()
    featDist = torch.mean(mse_criterion(predFeatures, image), 1)
    featLoss = featLoss + torch.mean(featDist)
    reward = prevFeatDist - featDist
    rewards.append(reward)
    prevFeatDist = featDist
    rlLoss = rlLoss + torch.mean(qBot.reinforce(reward))
optimizer.zero_grad()
(featLoss + rlLoss).backward()
optimizer.step()
print(rewards[0])
