"""Isaac Lab's `PreTrainedPolicyAction` after its fix: the low-level locomotion policy runs under `torch.no_grad()` and its output is detached before being copied into the persistent `low_level_actions` buffer, so the buffer and the joint targets derived from it stay plain tensors, and the simulator bridge accepts them even when the environment is stepped outside inference mode.

source: https://github.com/isaac-sim/IsaacLab/pull/5923
kind: lookalike
"""
import numpy as np
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

NUM_ENVS, NUM_JOINTS, OBS_DIM = 4, 12, 3 + 12 + 12


class Articulation:
    """Stand-in for the simulated robot: joint targets go to the physics engine as a host array."""

    def __init__(self):
        self.joint_pos = np.zeros((NUM_ENVS, NUM_JOINTS), dtype=np.float32)
        self._targets = np.zeros((NUM_ENVS, NUM_JOINTS), dtype=np.float32)

    def set_joint_position_target(self, targets: torch.Tensor):
        self._targets[:] = np.asarray(targets)

    def step_physics(self):
        self.joint_pos += 0.1 * (self._targets - self.joint_pos)


class JointPositionAction:
    def __init__(self, robot, scale=0.5):
        self.robot, self.scale = robot, scale
        self.action_dim = NUM_JOINTS
        self._processed_actions = torch.zeros(NUM_ENVS, NUM_JOINTS)

    def process_actions(self, actions):
        self._processed_actions = actions * self.scale

    def apply_actions(self):
        self.robot.set_joint_position_target(self._processed_actions)


class PreTrainedPolicyAction:
    """Velocity commands in, joint targets out through a frozen pre-trained locomotion policy."""

    def __init__(self, robot, policy, low_level_decimation=4):
        self.robot, self.policy, self.low_level_decimation = robot, policy, low_level_decimation
        self._raw_actions = torch.zeros(NUM_ENVS, 3)
        self._low_level_action_term = JointPositionAction(robot)
        self.low_level_actions = torch.zeros(NUM_ENVS, self._low_level_action_term.action_dim)
        self._counter = 0

    def low_level_observations(self):
        joint_pos = torch.from_numpy(self.robot.joint_pos.copy())
        return torch.cat([self._raw_actions, joint_pos, self.low_level_actions], dim=1)

    def process_actions(self, actions):
        self._raw_actions[:] = actions

    def apply_actions(self):
        if self._counter % self.low_level_decimation == 0:
            low_level_obs = self.low_level_observations()
            with torch.no_grad():
                self.low_level_actions[:] = self.policy(low_level_obs).detach()
            self._low_level_action_term.process_actions(self.low_level_actions)
            self._counter = 0
        self._low_level_action_term.apply_actions()
        self._counter += 1


class NavigationEnv:
    def __init__(self, policy, decimation=4):
        self.robot = Articulation()
        self.action_term = PreTrainedPolicyAction(self.robot, policy)
        self.decimation = decimation

    def step(self, actions):
        self.action_term.process_actions(actions)
        for _ in range(self.decimation):
            self.action_term.apply_actions()
            self.robot.step_physics()
        return torch.from_numpy(self.robot.joint_pos.copy())


# the locomotion policy as loaded from its checkpoint: an ordinary module whose weights require grad
locomotion_policy = nn.Sequential(nn.Linear(OBS_DIM, 64), nn.ELU(), nn.Linear(64, NUM_JOINTS)).eval()
env = NavigationEnv(locomotion_policy)
navigation_policy = nn.Linear(NUM_JOINTS, 3)  # the high-level policy being trained with RL
obs = torch.zeros(NUM_ENVS, NUM_JOINTS)
for step in range(5):
    with torch.no_grad():
        commands = torch.tanh(navigation_policy(obs))
    obs = env.step(commands)
    print(f"step {step}: mean joint position {obs.mean().item():.4f}")
