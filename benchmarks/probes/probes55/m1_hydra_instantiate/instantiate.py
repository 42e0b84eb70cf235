import importlib


def _locate(path):
    mod, _, name = path.rpartition(".")
    return getattr(importlib.import_module(mod), name)


def instantiate(cfg, **kwargs):
    if isinstance(cfg, dict) and "_target_" in cfg:
        args = {k: instantiate(v) for k, v in cfg.items() if k != "_target_"}
        args.update(kwargs)
        return _locate(cfg["_target_"])(**args)
    if isinstance(cfg, list):
        return [instantiate(v) for v in cfg]
    return cfg
