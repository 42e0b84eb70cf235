"""rlhf-ppo's `RolloutCollector.collect_rollout` scores the generated responses with the actor-critic (`compute_log_probs_and_values`) outside `torch.no_grad()` and stores the log-probabilities and values in the rollout batch as they are, still attached to the actor's graph; the GAE advantages and the rewards are computed from them too. The trainer then runs several PPO mini-batches over that one rollout: the first mini-batch's `backward()` walks through the rollout's graph (via the "old" log-probabilities, values and advantages) and frees it, so the second mini-batch's backward fails. The fix detaches the log-probabilities, values, rewards and reference log-probabilities in `collect_rollout`.

source: https://github.com/white-jim/rlhf-ppo/commit/892411b9ed01927c7cd441c8ba3f2ec3b5c7e1f6
kind: bug
symptom: crash
verified: Trying to backward through the graph a second time
"""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
random.seed(0)
torch.set_num_threads(1)
VOCAB, HIDDEN, PROMPT_LEN, RESPONSE_LEN = 12, 16, 4, 6


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.rnn = nn.GRU(HIDDEN, HIDDEN, batch_first=True)
        self.lm_head = nn.Linear(HIDDEN, VOCAB)
        self.value_head = nn.Linear(HIDDEN, 1)

    def forward(self, input_ids):
        h, _ = self.rnn(self.embed(input_ids))
        return {"logits": self.lm_head(h), "values": self.value_head(h).squeeze(-1)}


def action_log_probs_from_logits(logits, input_ids):
    log_probs = F.log_softmax(logits[:, :-1], dim=-1)
    picked = log_probs.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return torch.cat([torch.zeros_like(picked[:, :1]), picked], dim=1)


class RolloutCollector:
    def __init__(self, actor_critic, reference_model):
        self.actor_critic = actor_critic
        self.reference_model = reference_model

    def generate(self, prompts):
        with torch.no_grad():
            ids = prompts
            for _ in range(RESPONSE_LEN):
                logits = self.actor_critic(ids)["logits"][:, -1]
                ids = torch.cat([ids, torch.multinomial(F.softmax(logits, -1), 1)], dim=1)
        return ids

    def compute_log_probs_and_values(self, full_input_ids):
        outputs = self.actor_critic(full_input_ids)
        return action_log_probs_from_logits(outputs["logits"], full_input_ids), outputs["values"]

    def compute_rewards(self, full_input_ids, action_log_probs, ref_log_probs, kl_coef=0.1):
        rewards = -kl_coef * (action_log_probs - ref_log_probs)
        score = (full_input_ids[:, PROMPT_LEN:] == 3).float().mean(1)  # reward model stand-in
        rewards[:, -1] = rewards[:, -1] + score
        return rewards

    def collect_rollout(self, prompts):
        full_input_ids = self.generate(prompts)
        action_log_probs, values = self.compute_log_probs_and_values(full_input_ids)  # ROOT
        with torch.no_grad():
            ref_log_probs = action_log_probs_from_logits(self.reference_model(full_input_ids)["logits"], full_input_ids)
        rewards = self.compute_rewards(full_input_ids, action_log_probs, ref_log_probs)
        return {"input_ids": full_input_ids, "action_log_probs": action_log_probs, "values": values,
                "rewards": rewards}


def compute_gae_advantages(rewards, values, gamma=1.0, lam=0.95):
    advantages = torch.zeros_like(rewards)
    last = 0.0
    for t in range(rewards.shape[1] - 1, -1, -1):
        next_value = values[:, t + 1] if t + 1 < rewards.shape[1] else values[:, t]
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        last = delta + gamma * lam * last
        advantages[:, t] = last
    return advantages, advantages + values


def compute_ppo_loss(actor_critic, input_ids, old_log_probs, old_values, advantages, returns, clip=0.2):
    outputs = actor_critic(input_ids)
    log_probs = action_log_probs_from_logits(outputs["logits"], input_ids)
    ratio = torch.exp(log_probs - old_log_probs)
    policy_loss = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip, 1 + clip) * advantages)
    values_clipped = old_values + torch.clamp(outputs["values"] - old_values, -clip, clip)
    value_loss = torch.max((outputs["values"] - returns) ** 2, (values_clipped - returns) ** 2)
    mask = torch.zeros_like(log_probs)
    mask[:, PROMPT_LEN:] = 1.0
    return ((policy_loss + 0.5 * value_loss) * mask).sum() / mask.sum()


def train(steps=2, ppo_epochs=2, mini_batch_size=4):
    actor_critic, reference_model = ActorCritic(), ActorCritic()
    reference_model.load_state_dict(actor_critic.state_dict())
    collector = RolloutCollector(actor_critic, reference_model)
    optimizer = torch.optim.Adam(actor_critic.parameters(), lr=1e-3)
    for step in range(steps):
        rollout = collector.collect_rollout(torch.randint(0, VOCAB, (8, PROMPT_LEN)))
        advantages, returns = compute_gae_advantages(rollout["rewards"], rollout["values"])
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        indices = list(range(8))
        for ppo_epoch in range(ppo_epochs):
            random.shuffle(indices)
            for start in range(0, 8, mini_batch_size):
                mb = indices[start:start + mini_batch_size]
                loss = compute_ppo_loss(actor_critic, rollout["input_ids"][mb], rollout["action_log_probs"][mb],
                                        rollout["values"][mb], advantages[mb], returns[mb])
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(actor_critic.parameters(), 1.0)
                optimizer.step()
        print(f"step {step}: last mini-batch loss {loss.item():.4f}")


train()
