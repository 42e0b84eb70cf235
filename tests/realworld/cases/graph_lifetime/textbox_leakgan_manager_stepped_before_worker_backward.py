"""TextBox's LeakGAN trainer optimizes the manager and the worker with two optimizers in `_optimize_step`: for each (optimizer, loss) pair it backpropagates with `retain_graph=True` and steps at once; the worker's loss flows through the manager's goal vectors, so the manager optimizer's in-place update of `mana2goal` before the worker's backward makes that backward fail.

source: https://github.com/RUCAIBox/TextBox/commit/35166fc6d779c76558c6e903aa137d68de1cdfd5
kind: bug
symptom: crash
verified: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)
VOCAB, EMB, HIDDEN, GOAL_OUT, GOAL, STEP, MAX_LEN, BATCH = 30, 16, 32, 12, 8, 4, 12, 6


class LeakGANGenerator(nn.Module):
    def __init__(self):
        super().__init__()
        self.word_embedding = nn.Embedding(VOCAB, EMB)
        self.worker = nn.LSTMCell(EMB, HIDDEN)
        self.manager = nn.LSTMCell(GOAL_OUT, HIDDEN)
        self.work2goal = nn.Linear(HIDDEN, VOCAB * GOAL)
        self.mana2goal = nn.Linear(HIDDEN, GOAL_OUT)
        self.goal2goal = nn.Linear(GOAL_OUT, GOAL, bias=False)
        self.goal_init = nn.Parameter(torch.rand(BATCH, GOAL_OUT))

    def leakgan_forward(self, targets, features):
        batch_size = targets.size(0)
        work_h = work_c = mana_h = mana_c = torch.zeros(batch_size, HIDDEN)
        real_goal = self.goal_init[:batch_size]
        goals, outs = [], []
        inp = torch.zeros(batch_size, dtype=torch.long)
        for i in range(MAX_LEN):
            mana_h, mana_c = self.manager(features[:, i], (mana_h, mana_c))
            cur_goal = F.normalize(self.mana2goal(mana_h), p=2, dim=-1)
            goals.append(cur_goal)
            work_h, work_c = self.worker(self.word_embedding(inp), (work_h, work_c))
            work_out = self.work2goal(work_h).view(-1, VOCAB, GOAL)
            _real_goal = F.normalize(self.goal2goal(real_goal), p=2, dim=-1).unsqueeze(-1)
            outs.append(torch.matmul(work_out, _real_goal).squeeze(-1))
            if (i + 1) % STEP == 0:
                real_goal = torch.stack(goals[-STEP:], 1).sum(1)
            inp = targets[:, i]
        return torch.stack(outs, 1), torch.stack(goals, 1)

    def pretrain_loss(self, targets, features):
        leak_out, goal_array = self.leakgan_forward(targets, features)
        sub_feature = features[:, STEP::STEP] - features[:, :-STEP:STEP]
        real_goal = goal_array.unfold(1, STEP, STEP).sum(-1)[:, :sub_feature.size(1)]
        manager_loss = -F.cosine_similarity(sub_feature, real_goal, dim=-1).mean()
        worker_loss = F.cross_entropy(leak_out.reshape(-1, VOCAB), targets.reshape(-1))
        return manager_loss, worker_loss


class LeakGANTrainer:
    grad_clip = 5.0

    def _optimize_step(self, losses, total_loss, model, opt):
        loss = sum(losses)
        loss_tuple = tuple(per_loss.item() for per_loss in losses)
        total_loss = loss_tuple if total_loss is None else tuple(map(sum, zip(total_loss, loss_tuple)))
        if torch.isnan(loss):
            raise ValueError('Training loss is nan')
        for i, (o, loss) in enumerate(zip(opt, losses)):
            o.zero_grad()
            loss.backward(retain_graph=True if i < len(opt) - 1 else False)
            torch.nn.utils.clip_grad_norm_(model.parameters(), self.grad_clip)
            o.step()  # ROOT
        return total_loss


generator = LeakGANGenerator()
manager_params = list(generator.manager.parameters()) + list(generator.mana2goal.parameters())
worker_params = [p for n, p in generator.named_parameters() if not n.startswith(('manager.', 'mana2goal.'))]
opt = (torch.optim.Adam(manager_params, lr=1e-3), torch.optim.Adam(worker_params, lr=1e-3))
leak_features = nn.Conv1d(EMB, GOAL_OUT, 3, padding=1)  # stands in for the discriminator's leaked features
trainer = LeakGANTrainer()

total = None
for step in range(3):
    targets = torch.randint(0, VOCAB, (BATCH, MAX_LEN))
    with torch.no_grad():
        features = leak_features(generator.word_embedding(targets).transpose(1, 2)).transpose(1, 2)
    losses = generator.pretrain_loss(targets, features)
    total = trainer._optimize_step(losses, total, generator, opt)
    print(f"step {step}: manager loss {losses[0].item():.4f}  worker loss {losses[1].item():.4f}")
