"""Whether a module class of the file computes the same in train and eval mode.

# NOTE [mode-free modules]
``Module.train()``/``eval()`` only set ``training`` on every submodule; what changes is what
reads it: Dropout (and ``RReLU``) draw in train mode only, BatchNorm (and InstanceNorm with
``track_running_stats=True``) update running statistics in train mode and use them in eval
mode (pytorch-facts.md#frozen-norm-statistics), and code that tests ``self.training``. A class
of the file whose methods build only torch layers that read no ``training`` (``Linear``,
``Conv2d``, ``Embedding``, ``LayerNorm``, activations, pooling, ``Flatten``, the containers),
classes of the file that are themselves mode-free, never read ``.training`` and do not override
``train()`` or ``eval()``, runs the same in both modes: putting it back in train mode changes
nothing. Anything else it calls that could build a module is unknown and answers False: a layer class of torch not in that list, a function or class of
another package (``torchvision.models.resnet18()``, ``clip.load(...)``), a function of the file
(``make_layers(cfg)`` may add BatchNorm), a callable held in a variable (``norm_layer(c)``,
``for blk in self.blocks: x = blk(x)``), ``self.<attr>(...)`` of an attribute not built by a call
in the class (``self.encoder = encoder``: the module was made elsewhere), a container built from a
name the class never binds (``nn.Sequential(*layers)`` of a parameter ``layers``).
"""
from __future__ import annotations

import ast
import builtins
from typing import TYPE_CHECKING

from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

_ACTIVATIONS = (
    "ReLU", "ReLU6", "LeakyReLU", "PReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish", "Tanh",
    "Sigmoid", "Hardtanh", "Hardswish", "Hardsigmoid", "Hardshrink", "Softshrink", "Tanhshrink",
    "Softplus", "Softsign", "Softmax", "Softmin", "Softmax2d", "LogSoftmax", "LogSigmoid",
    "Threshold", "GLU")
_LAYERS = (
    "Linear", "LazyLinear", "Bilinear", "Identity", "Conv1d", "Conv2d", "Conv3d",
    "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "LazyConv1d", "LazyConv2d",
    "LazyConv3d", "Embedding", "EmbeddingBag", "LayerNorm", "GroupNorm", "RMSNorm",
    "LocalResponseNorm", "Flatten", "Unflatten", "MaxPool1d", "MaxPool2d", "MaxPool3d",
    "AvgPool1d", "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d",
    "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d",
    "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d", "PixelShuffle", "PixelUnshuffle",
    "ZeroPad2d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ReflectionPad1d",
    "ReflectionPad2d", "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d",
    "CosineSimilarity", "PairwiseDistance", "Sequential", "ModuleList", "ModuleDict",
    "ParameterList", "ParameterDict", "Parameter")
MODE_FREE_LAYERS = frozenset(f"torch.nn.{n}" for n in (*_ACTIVATIONS, *_LAYERS))
_BUILTINS = frozenset(dir(builtins))
_CONTAINERS = frozenset({"torch.nn.Sequential", "torch.nn.ModuleList", "torch.nn.ModuleDict"})
_MODULE_METHODS = frozenset({  # nn.Module's own methods called on `self`
    "requires_grad_", "parameters", "named_parameters", "modules", "named_modules", "children",
    "named_children", "buffers", "named_buffers", "register_buffer", "register_parameter",
    "to", "cuda", "cpu", "float", "double", "half", "apply", "state_dict", "load_state_dict",
    "zero_grad", "eval", "train", "forward"})


def mode_free_class(name: str, ctx: Context) -> bool:
    """Whether the module class ``name`` of the file (with its bases of the file) runs the same
    in train and eval mode, as far as the file shows (NOTE [mode-free modules])."""
    memo: dict[str, bool] = ctx.memo("mode-free-classes", ctx.tree, dict)
    if name not in memo:
        memo[name] = False  # a class that builds itself: unknown
        memo[name] = _free(name, ctx)
    return memo[name]


def _free(name: str, ctx: Context) -> bool:
    cls = ctx.analysis.classes.get(name)
    if cls is None or not cls.is_module or "train" in cls.methods or "eval" in cls.methods:
        return False  # its own `train()` may act on the mode (MobileSAM caches a table there)
    for b in cls.node.bases:
        q = ctx.qualified_name(b) or ""
        if q not in ("torch.nn.Module", "torch.nn.modules.module.Module") and not (
                isinstance(b, ast.Name) and mode_free_class(b.id, ctx)):
            return False
    built: dict[str, bool] = {}
    stored: set[str] = set()
    for n in walk(cls.node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            stored.add(n.id)
        elif isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) \
                        and t.value.id == "self":
                    built[t.attr] = built.get(t.attr, True) and isinstance(n.value, ast.Call)
    for n in walk(cls.node):
        if not _free_node(n, ctx):
            return False
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                and f.value.id == "self" and cls.method(f.attr) is None \
                and not built.get(f.attr, False) and f.attr not in _MODULE_METHODS:
            return False  # `self.encoder(x)` of a module handed in
        if (ctx.call_name(n) or "") in _CONTAINERS and any(
                isinstance(a, ast.Name) and a.id not in stored for arg in (
                    *n.args, *(k.value for k in n.keywords)) for a in (
                    arg.value if isinstance(arg, ast.Starred) else arg,
                    *(arg.elts if isinstance(arg, (ast.List, ast.Tuple)) else ()))):
            return False  # `nn.Sequential(*layers)` of layers handed in
    return True


def _free_node(n: ast.AST, ctx: Context) -> bool:
    if isinstance(n, ast.Attribute):
        return n.attr != "training"
    if not isinstance(n, ast.Call):
        return True
    f = n.func
    root = f
    while isinstance(root, ast.Attribute):
        root = root.value
    if isinstance(root, ast.Call) or not isinstance(root, ast.Name):
        return True  # a method of a value computed here (`self.net(z).view(...)`)
    q = ctx.call_name(n) or ""
    if q.startswith("torch."):
        head = q.split(".")[2] if q.startswith("torch.nn.") and q.count(".") >= 2 else ""
        return not head[:1].isupper() or q in MODE_FREE_LAYERS
    if ctx.imports.is_imported(root.id):
        return False  # another package's function or class
    if isinstance(f, ast.Attribute):
        return True  # a method of a local value or of `self`
    if f.id in ctx.analysis.classes:
        c = ctx.analysis.classes[f.id]
        return not c.is_module or mode_free_class(f.id, ctx)
    return f.id in _BUILTINS


def mode_free_part(ev: ast.Call, holder: object, scope: object, ctx: Context) -> bool:
    """Whether the module that ``ev`` (``x.eval()``) switches is known to run the same in both
    modes: ``self.<attr>`` built in ``holder`` (a class of the file) by one call, or a value the
    analysis layer knows the class of (NOTE [mode-free modules])."""
    recv = ev.func.value  # type: ignore[attr-defined]
    if isinstance(recv, ast.Attribute) and isinstance(recv.value, ast.Name) \
            and recv.value.id == "self" and holder is not None:
        info = getattr(holder, "attrs", {}).get(recv.attr)
        v = info.value if info is not None and not info.later else None
        return isinstance(v, ast.Call) and _free_call(v, ctx)
    k = ctx.analysis.kind(recv, scope, ev.lineno)  # type: ignore[arg-type]
    return k is not None and k.cls is not None and mode_free_class(k.cls, ctx)


def _free_call(v: ast.Call, ctx: Context) -> bool:
    """``Generator()`` of a mode-free class, or torch layers only (``nn.Sequential(nn.Linear(
    4, 4), nn.Tanh())``)."""
    if isinstance(v.func, ast.Name) and v.func.id in ctx.analysis.classes:
        return mode_free_class(v.func.id, ctx)
    q = ctx.call_name(v) or ""
    if q not in MODE_FREE_LAYERS:
        return False
    return all(_free_arg(a, ctx) for a in (*v.args, *(k.value for k in v.keywords)))


def _free_arg(a: ast.expr, ctx: Context) -> bool:
    if isinstance(a, ast.Starred):
        return False  # `nn.Sequential(*blocks)`: built elsewhere
    if not isinstance(a, ast.Call):
        return all(not isinstance(n, ast.Call) or _free_arg(n, ctx) for n in walk(a)
                   if n is not a)
    q = ctx.call_name(a) or ""
    if q.rpartition(".")[2][:1].isupper():
        return _free_call(a, ctx)
    return q.startswith("torch.") or q in _BUILTINS
