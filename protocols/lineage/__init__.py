"""``lineage``: purge the failed instances' downstream and recompute it from the start.

The baseline of paper 000 (Noria's recovery). On a failure of a set F, every instance in
``reachable_from(F)`` (F and everything downstream) is stopped and started empty; nothing
upstream of that purged set is touched. The purged set is rebuilt by replaying all input
from the beginning through it:

- purged sources restart at their first offset (sources are replayable);
- a surviving instance that feeds the purged set resends its **full** output history on
  those channels from its payload log. The choice: instances keep complete payload logs
  (no garbage collection), because a purge can always reach back to the first batch; that
  is the memory cost this baseline pays instead of snapshots.

Replacements report ``Ready`` once running; the coordinator then asks each of their
parents to resend from the first batch (a resend before the replacement runs would be
lost with the dead incarnation). Sinks keep their visible output and suppress, per record
identity, as many records as they already made visible (``protocols/shared/logged.py``:
the record itself under ``multiset``, the key under the per-key modes), so the
recomputation never duplicates output in whatever order its channels interleave:
exactly-once for every topology ``ftctl validate`` accepts.

Modules: ``instance`` (``LineageInstance``), ``coordinator`` (``LineageCoordinator``),
``mutants`` (planted bugs), ``spec`` (``SPEC``, what the registry holds).
"""
