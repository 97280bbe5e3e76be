"""``progressive``: progressive, query-centric recovery of correlated failures (paper 004).

A burst of node failures switches adaptive upstream buffering on; as capacity returns, the
failed queries are restored in profit-density order, re-planned at every arrival, while
order-preserving mini-batches and per-channel sequence numbers keep replays exactly-once.

Pure modules, no clock, randomness or I/O:

- ``schedule``   which pending instances to start: profit density, topological, blocking;
- ``burst``      the burst detector and the recovery mode it selects;
- ``minibatch``  mini-batch boundaries, the order-preserving aligner, de-duplication;
- ``buffers``    punctuation checkpoints, the source buffer and the recovery buffers;
- ``params``     the run's parameters.
"""
