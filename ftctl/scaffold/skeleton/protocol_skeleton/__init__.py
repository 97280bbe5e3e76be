"""``protocol-skeleton``: restart a failed instance from its own last snapshot and replay
its inputs from the upstream instances' logs. Exactly-once, with no global rollback.

How it works, one instance at a time:

- **Deterministic input order.** An instance reads its input channels in a fixed
  rotation (one batch from each in turn, skipping channels that ended), however they
  interleave on the wire. Its output is then a function of its input sequences alone, so
  a replacement that reads the same inputs again sends the very same batches, with the
  same sequence numbers, and a child can drop what it already has by number.
- **Local snapshots.** Every ``snapshot_every`` batches an instance persists its
  operator state, where it is in each input, its rotation, and the batches it sent that
  a child may still ask for (its payload log); then it reports ``LocalSnapshot``.
- **Upstream replay.** A replacement restores its own newest snapshot and reports
  ``Ready``: the coordinator asks each parent to resend from the position after the
  snapshot (``Resend``). It also resends its restored log, in case a running child is
  behind the snapshot.
- **Log trimming.** Once a child's snapshot is durable, its parent never needs to resend
  what the child had read: the coordinator forwards ``TrimPayloadLog``.
- **Sinks** make a record visible only once (``protocols/shared/logged.py``): they count
  per record identity what is visible and persist those counts with every output.

Modules: ``params`` (``Params``), ``messages``, ``instance`` (``Instance``),
``coordinator`` (``Coordinator``), ``mutants`` (planted bugs), ``spec`` (``SPEC``, what
the entry point names).
"""
