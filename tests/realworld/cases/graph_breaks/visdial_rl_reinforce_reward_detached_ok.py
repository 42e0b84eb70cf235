"""visdial-rl Decoder.reinforce with the fix the issue proposes: reward.detach() makes the reward a constant weight on the log-probabilities, so only featLoss trains the feature regression network.

source: https://github.com/batra-mlp-lab/visdial-rl/issues/13
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Categorical


class Decoder(nn.Module):
    def __init__(self, vocabSize=12, embedSize=8, rnnHiddenSize=16):
        super().__init__()
        self.wordEmbed = nn.Embedding(vocabSize, embedSize)
        self.rnn = nn.LSTMCell(embedSize, rnnHiddenSize)
        self.outNet = nn.Linear(rnnHiddenSize, vocabSize)
        self.saved_log_probs = []

    def forwardDecode(self, encState, maxSeqLen=4):
        h, c = encState, torch.zeros_like(encState)
        token = torch.zeros(encState.size(0), dtype=torch.long)
        self.saved_log_probs, samples = [], []
        for t in range(maxSeqLen):
            h, c = self.rnn(self.wordEmbed(token), (h, c))
            dist = Categorical(logits=self.outNet(h))
            token = dist.sample()
            self.saved_log_probs.append(dist.log_prob(token))
            samples.append(token)
        self.mask = torch.ones(encState.size(0), maxSeqLen)
        return torch.stack(samples, 1)

    def reinforce(self, reward):
        loss = 0
        for t, log_prob in enumerate(self.saved_log_probs):
            loss += -1 * log_prob * (reward.detach() * (self.mask[:, t].float()))
        return loss


class QBot(nn.Module):
    def __init__(self, imgFeatureSize=6, rnnHiddenSize=16):
        super().__init__()
        self.encoder = nn.GRUCell(imgFeatureSize, rnnHiddenSize)
        self.decoder = Decoder(rnnHiddenSize=rnnHiddenSize)
        self.featureNet = nn.Linear(rnnHiddenSize, imgFeatureSize)
        self.state = None

    def observe(self, caption):
        self.state = self.encoder(caption)

    def forwardDecode(self):
        return self.decoder.forwardDecode(self.state)

    def predictImage(self):
        return self.featureNet(self.state)

    def reinforce(self, reward):
        return self.decoder.reinforce(reward)


torch.manual_seed(0)
qBot = QBot()
mse_criterion = nn.MSELoss(reduce=False)
image, caption = torch.randn(4, 6), torch.randn(4, 6)
qBot.observe(caption)
prevFeatDist = torch.mean(mse_criterion(qBot.predictImage(), image), 1)
featLoss, qBotRLLoss = 0, 0
for round in range(3):
    questions = qBot.forwardDecode()
    qBot.observe(F.one_hot(questions[:, -1], 12).float()[:, :6] + caption)
    predFeatures = qBot.predictImage()
    featDist = torch.mean(mse_criterion(predFeatures, image), 1)
    featLoss = featLoss + torch.mean(featDist)
    reward = prevFeatDist - featDist
    prevFeatDist = featDist
    qBotRLLoss = qBotRLLoss + torch.mean(qBot.reinforce(reward))

featGrad = torch.autograd.grad(featLoss, qBot.featureNet.weight, retain_graph=True)[0]
loss = featLoss + qBotRLLoss
loss.backward()
print((qBot.featureNet.weight.grad - featGrad).abs().max().item(), featGrad.abs().max().item())
