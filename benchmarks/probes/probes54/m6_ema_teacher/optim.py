import torch


def build_optimizer(teacher, student, lr=1e-2):
    return torch.optim.SGD(teacher.module.parameters(), lr=lr, momentum=0.9)  # ROOT
