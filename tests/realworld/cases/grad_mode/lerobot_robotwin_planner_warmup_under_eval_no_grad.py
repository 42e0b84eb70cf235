"""lerobot's eval script runs the whole rollout under `torch.no_grad()`; the RoboTwin env's `reset` calls the task's `setup_demo`, which loads the robot and warms up its CuRobo motion planner, whose trajectory optimizer calls `cost.backward()` itself: with autograd disabled by the caller the cost has no grad_fn and the planner's warm-up fails before the first episode.

source: https://github.com/huggingface/lerobot/commit/b06f134fe45de08b454d69a37f96349d6aece1ca
kind: bug
symptom: crash
verified: element 0 of tensors does not require grad and does not have a grad_fn
"""
from contextlib import nullcontext

import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
ACTION_DIM = 14


class CuroboPlanner:
    """Stands in for CuRobo's MotionGen: plans a joint trajectory by gradient descent (its own optimizer loop) on a smoothness + goal cost."""

    def __init__(self, n_joints=ACTION_DIM, horizon=16):
        self.n_joints, self.horizon = n_joints, horizon

    def plan(self, start, goal, iters=5, step_size=0.2):
        traj = start.expand(self.horizon, -1).clone().requires_grad_(True)
        for _ in range(iters):
            cost = ((traj[1:] - traj[:-1]) ** 2).sum() + ((traj[-1] - goal) ** 2).sum()
            cost.backward()
            with torch.no_grad():
                traj -= step_size * traj.grad
                traj.grad = None
        return traj.detach()

    def warmup(self):
        self.plan(torch.zeros(self.n_joints), torch.ones(self.n_joints))


class BaseTask:
    """Stands in for RoboTwin's base_task: setup_demo loads the robot (and its planner), take_action plans to the action."""

    def setup_demo(self, seed=0, is_test=True, **kwargs):
        self.qpos = torch.zeros(ACTION_DIM)
        self.planner = CuroboPlanner()
        self.planner.warmup()

    def take_action(self, action):
        traj = self.planner.plan(self.qpos, torch.as_tensor(action, dtype=torch.float32))
        self.qpos = traj[-1]

    def get_obs(self):
        return {"joint_action": self.qpos.numpy().astype(np.float64)}


class RoboTwinEnv:
    def __init__(self, task_name="beat_block_hammer"):
        self.task_name = task_name
        self._env = None
        self.episode_index = 0

    def reset(self, seed=None):
        if self._env is None:
            self._env = BaseTask()
        setup_kwargs = dict(seed=self.episode_index if seed is None else seed, is_test=True)
        self._env.setup_demo(**setup_kwargs)  # ROOT
        self.episode_index += 1
        return self._get_obs(), {"is_success": False, "task": self.task_name}

    def step(self, action):
        if hasattr(self._env, "take_action"):
            self._env.take_action(action)
        else:
            self._env.step(action)
        return self._get_obs(), 0.0, False, False, {}

    def _get_obs(self):
        raw = self._env.get_obs()
        return {"agent_pos": np.asarray(raw["joint_action"], dtype=np.float64)[:ACTION_DIM]}


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(ACTION_DIM, ACTION_DIM)

    def select_action(self, agent_pos):
        return torch.tanh(self.net(agent_pos))


def eval_policy(env, policy, n_episodes=1, max_steps=3):
    for ep in range(n_episodes):
        obs, info = env.reset(seed=ep)
        for t in range(max_steps):
            action = policy.select_action(torch.as_tensor(obs["agent_pos"], dtype=torch.float32))
            obs, reward, terminated, truncated, info = env.step(action.numpy())
        print(f"episode {ep}: final joints {obs['agent_pos'][:3].round(3)}")


policy = Policy().eval()
use_amp = False
with torch.no_grad(), torch.autocast(device_type="cpu") if use_amp else nullcontext():
    eval_policy(RoboTwinEnv(), policy)
