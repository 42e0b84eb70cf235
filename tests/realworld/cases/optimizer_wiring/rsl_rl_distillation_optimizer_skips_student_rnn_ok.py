"""rsl_rl's Distillation algorithm after the fix: for the recurrent student-teacher policy the optimizer is given the student MLP's parameters together with those of the student's GRU memory `memory_s`, so behavior cloning trains the memory as well as the head.

source: https://github.com/leggedrobotics/rsl_rl/pull/94
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.optim as optim


class Memory(nn.Module):
    def __init__(self, input_size, hidden_size=32):
        super().__init__()
        self.rnn = nn.GRU(input_size=input_size, hidden_size=hidden_size, batch_first=True)

    def forward(self, obs_seq):
        out, _ = self.rnn(obs_seq)
        return out


def mlp(sizes):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ELU())
    return nn.Sequential(*layers)


class StudentTeacherRecurrent(nn.Module):
    is_recurrent = True

    def __init__(self, num_student_obs, num_teacher_obs, num_actions, rnn_hidden_dim=32):
        super().__init__()
        self.memory_s = Memory(num_student_obs, hidden_size=rnn_hidden_dim)
        self.student = mlp([rnn_hidden_dim, 64, num_actions])
        self.teacher = mlp([num_teacher_obs, 64, num_actions])
        self.teacher.eval()
        for p in self.teacher.parameters():
            p.requires_grad_(False)

    def act_inference(self, student_obs_seq):
        return self.student(self.memory_s(student_obs_seq))

    def evaluate(self, teacher_obs_seq):
        with torch.no_grad():
            return self.teacher(teacher_obs_seq)


class Distillation:
    def __init__(self, policy, num_learning_epochs=1, learning_rate=1e-3, device="cpu"):
        self.device = device
        self.learning_rate = learning_rate
        self.policy = policy
        self.policy.to(self.device)
        params = list(self.policy.student.parameters())
        if self.policy.is_recurrent:
            params += list(self.policy.memory_s.parameters())
        self.optimizer = optim.Adam(params, lr=self.learning_rate)
        self.num_learning_epochs = num_learning_epochs

    def update(self, student_obs, teacher_obs):
        mean_loss = 0.0
        for _ in range(self.num_learning_epochs):
            actions = self.policy.act_inference(student_obs)
            actions_teacher = self.policy.evaluate(teacher_obs)
            behavior_loss = nn.functional.mse_loss(actions, actions_teacher)
            self.optimizer.zero_grad()
            behavior_loss.backward()
            self.optimizer.step()
            mean_loss += behavior_loss.item()
        return mean_loss / self.num_learning_epochs


torch.manual_seed(0)
policy = StudentTeacherRecurrent(num_student_obs=6, num_teacher_obs=9, num_actions=3)
algo = Distillation(policy, num_learning_epochs=2)
gru_before = [p.detach().clone() for p in policy.memory_s.parameters()]
for it in range(15):
    privileged = torch.randn(16, 10, 3)
    student_obs = torch.cat([torch.randn(16, 10, 6)[..., :3], privileged.cumsum(1) / 3], dim=-1)
    teacher_obs = torch.cat([student_obs, privileged], dim=-1)
    loss = algo.update(student_obs, teacher_obs)
gru_moved = max((p - b).abs().max().item() for p, b in zip(policy.memory_s.parameters(), gru_before))
print("behavior loss %.4f" % loss, "GRU weight change %.5f" % gru_moved)
