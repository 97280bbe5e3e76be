"""``checkpoint``: asynchronous snapshots with channel state (Noir, paper 003), or aligned
(Flink's barrier alignment); global rollback to the last complete snapshot; transactional
sinks whose output becomes visible when the snapshot it belongs to is complete.

- ``instance``     tokens, channel state, alignment, staged sink output;
- ``coordinator``  snapshot completion, per-sink commits, global rollback;
- ``params``       interval and alignment;
- ``mutants``      planted bugs the conformance kit must catch;
- ``spec``         the registry entry.
"""
