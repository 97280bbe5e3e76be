"""The protocol kernel: drives a protocol's logic on either host, sans I/O.

- ``coordinator``: the driver side. Incarnations and stale-event dropping, held controls,
  release groups, per-sink commits, per-instance discards, the cluster view; it turns
  ``CoordinatorAction`` into host commands (``commands``).
- ``unit``: the instance side. Builds a unit's cores and logic and interprets its
  ``InstanceAction`` through the host's ports (transport, storage, timers).
- ``outputs``: staged sink output and commits.

Hosts keep only transport, time, stable storage and process control. Nothing here draws
random numbers, reads a clock or opens a file or socket.
"""
