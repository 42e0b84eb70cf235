"""``gradtrace.watch``: gradient flow per layer over training, as a report object.

Entry point: :mod:`.watcher`; :mod:`.collect` gathers the per-step statistics.
"""
