"""Isaac Lab's `PreTrainedPolicyAction` (navigation tasks) runs a pre-trained low-level locomotion policy every few physics steps and copies its output into a persistent buffer, `self.low_level_actions[:] = self.policy(low_level_obs)`, which it hands to the joint-position action term. When the environment is stepped outside `torch.inference_mode()` (as RL training scripts do), the loaded policy's weights require grad, so the in-place copy turns the plain zero buffer into a tensor that requires grad and carries a graph; the joint-position term's targets inherit it, and the simulator bridge (Warp, reading `__cuda_array_interface__`; here a CPU array bridge reading `__array__`) refuses such a tensor, so the first environment step crashes far from the copy. The fix runs the low-level policy under `torch.no_grad()` and detaches its output before the copy.

source: https://github.com/isaac-sim/IsaacLab/pull/5923
kind: bug
symptom: crash
verified: RuntimeError: Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.
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
            self.low_level_actions[:] = self.policy(low_level_obs)  # ROOT
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
