"""learning-to-learn-by-pytorch's Learner unrolls an optimizer on a quadratic and calls update.retain_grad() after every step; with the hand-crafted SGD baseline the update is computed from x.grad.clone().detach() and does not require grad, so the evaluation run fails.

source: https://github.com/yangsenius/learning-to-learn-by-pytorch/issues/5
kind: bug
symptom: crash
verified: RuntimeError: can't retain_grad on Tensor that has requires_grad=False
"""
import torch

DIM = 10
batchsize = 128


def f(W, Y, x):
    """quadratic function : f(\\theta) = \\|W\\theta - y\\|_2^2"""
    return ((torch.matmul(W, x.unsqueeze(-1)).squeeze() - Y) ** 2).sum(dim=1).mean(dim=0)


def SGD(gradients, state, learning_rate=0.001):
    return -gradients * learning_rate, state


class Learner(object):
    def __init__(self, f, optimizer, train_steps, eval_flag=False, retain_graph_flag=False, reset_theta=False):
        self.f = f
        self.optimizer = optimizer
        self.train_steps = train_steps
        self.eval_flag = eval_flag
        self.retain_graph_flag = retain_graph_flag
        self.reset_theta = reset_theta
        self.W = torch.randn(batchsize, DIM, DIM)
        self.Y = torch.randn(batchsize, DIM)
        self.x = torch.zeros(batchsize, DIM)
        self.x.requires_grad = True
        self.state = None
        self.global_loss_graph = 0
        self.losses = []

    def __call__(self, num_roll=0):
        f = self.f
        x, W, Y, state = self.x, self.W, self.Y, self.state
        if num_roll == 0 and self.reset_theta:
            x = torch.zeros(batchsize, DIM).clone().detach().requires_grad_(True)
        self.global_loss_graph = 0
        optimizer = self.optimizer
        for i in range(self.train_steps):
            loss = f(W, Y, x)
            self.global_loss_graph += loss
            loss.backward(retain_graph=self.retain_graph_flag)
            update, state = optimizer(x.grad.clone().detach(), state)
            self.losses.append(loss)
            x = x + update
            x.retain_grad()
            update.retain_grad()  # ROOT
        return self.losses, self.global_loss_graph


torch.manual_seed(0)
STEPS = 100
SGD_Learner = Learner(f, SGD, STEPS, eval_flag=True, reset_theta=True)
sgd_losses, sgd_sum_loss = SGD_Learner()
print(sgd_losses[-1].item(), sgd_sum_loss.item())
