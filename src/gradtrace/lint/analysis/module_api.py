"""What every ``nn.Module`` brings from torch: the root classes and their public methods.

Facts about torch's API (torch 2.x ``dir(nn.Module)``), shared by the rules and facts that must
tell a method the file defines from one torch defines or calls.
"""
from __future__ import annotations

ROOT_BASES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module"})
# the methods every module inherits from nn.Module (torch 2.x `dir(nn.Module)`, public)
MODULE_METHODS = frozenset({
    "add_module", "apply", "bfloat16", "buffers", "children", "compile", "cpu", "cuda",
    "double", "eval", "extra_repr", "float", "forward", "get_buffer", "get_extra_state",
    "get_parameter", "get_submodule", "half", "ipu", "load_state_dict", "modules", "mtia",
    "named_buffers", "named_children", "named_modules", "named_parameters", "parameters",
    "register_backward_hook", "register_buffer", "register_forward_hook",
    "register_forward_pre_hook", "register_full_backward_hook",
    "register_full_backward_pre_hook", "register_load_state_dict_post_hook",
    "register_load_state_dict_pre_hook", "register_module", "register_parameter",
    "register_state_dict_post_hook", "register_state_dict_pre_hook", "requires_grad_",
    "set_extra_state", "set_submodule", "share_memory", "state_dict", "to", "to_empty",
    "train", "type", "xpu", "zero_grad", "_apply", "_get_name", "_call_impl"})
