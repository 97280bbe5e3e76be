"""``replica-ring``: DADSTORM's operator replicas in a ring (paper 002).

Each operator runs R replicas; each pings its ring successor, the successor of a dead
replica takes over its slot, and small tuple records shared among the replicas let a
taker re-fetch and reprocess the dead replica's pending tuples. One mechanism gives three
delivery semantics, chosen per run.

Pure modules, no clock, randomness or I/O:

- ``params``     the run's parameters and the behaviour they imply (``Policy``);
- ``ring``       successor, ping duty, the ping detector, choosing the taker;
- ``records``    tuple records and the delivery table;
- ``accounting`` the message counts behind the paper's Table 1;
- ``model``      a step-level model of a two-operator chain that plays literal
                 fault schedules (the paper's schedules and its flaws);
- ``mutants``    planted bugs, each caught by a named check.
"""
