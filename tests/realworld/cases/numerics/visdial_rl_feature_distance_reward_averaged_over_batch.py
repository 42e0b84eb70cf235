"""visdial-rl train.py: featDist = mse_criterion(predFeatures, image) with a mean-reducing MSELoss is one number for the whole batch, so reward = prevFeatDist - featDist gives every dialog in the batch the same reward and REINFORCE cannot tell the good questions from the bad ones.

source: https://github.com/batra-mlp-lab/visdial-rl/pull/12
kind: bug
symptom: silent
verified: the round-1 reward is a 0-dim tensor, the same 0.053 for all 4 dialogs; with per-sample distances (reduction 'none', mean over the feature dim) the 4 rewards are 0.089, 0.064, 0.023 and 0.035
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
mse_criterion = nn.MSELoss()  # ROOT
image, caption = torch.randn(4, 6), torch.randn(4, 6)
qBot.observe(caption)
prevFeatDist = mse_criterion(qBot.predictImage(), image)
featLoss, rlLoss, rewards = 0, 0, []
for round in range(3):
    question = qBot.forwardDecode()
    qBot.observe(qBot.wordEmbed(question))
    predFeatures = qBot.predictImage()
    featDist = mse_criterion(predFeatures, image)
    featLoss = featLoss + torch.mean(featDist)
    reward = prevFeatDist - featDist
    rewards.append(reward)
    prevFeatDist = featDist
    rlLoss = rlLoss + torch.mean(qBot.reinforce(reward))
optimizer.zero_grad()
(featLoss + rlLoss).backward()
optimizer.step()
print(rewards[0])
