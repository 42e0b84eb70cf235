"""gradtrace under ``torchrun``: per-rank sessions, their exchange, rank 0's merged report.

Entry point: :mod:`.ranks`.
"""
