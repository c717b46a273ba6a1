"""The run folder: its files (:mod:`.files`) and a planned run of a comparison (:mod:`.plan`).

This ``__init__`` imports nothing: the experiment runner and the training loop, below this package in
the dependency order (tests/test_layers.py), import :mod:`.files` alone.
"""
