"""``causal``: causal logging with tree clocks (paper 000), extended to stateful instances.

Normal operation (per instance, no coordination):

- The message unit is a **batch**: one tree-clock diff per batch, not per record. An
  instance's time counts the batches it has processed (a source's, the batches it made).
- Processing a batch from parent P builds the diff ``self:time+1 -> P's piggybacked diff``
  (``protocols/shared/treeclock.py``), logs it in the **diff log** of that input channel and applies
  it to the instance's clock. Every batch sent carries the last diff in ``Batch.meta``.
- Diffs are truncated to ``depth + 1`` levels below the root (``depth`` is f, how many
  adjacent failures are recovered locally), so the piggyback is constant-size.
- Every batch carries its **sender time** (the root of its diff; without clocks the bare
  root) and is kept in the **payload log** of its output channel, addressed by that time
  (spec D5): resends, trimming and a replacement's output filter name sender times. The
  channel's ``seq`` is only a FIFO gap check at the receiver.
- **No silent events** (spec N5): an event that sends nothing on an output channel sends
  an empty batch there, so each child's diff log holds every event of its parent up to
  the child's position and replay can place all of them. A stateless instance with one
  input and several outputs is quiet instead (rule N6): its next batch on the channel
  carries the diffs of the events it was silent for there, which the child logs. End of
  stream is an event of its own: once every input ended, the flush (windows fired at the
  last watermark) gets the next time and a bare diff and sends on every output, so each
  sender time names exactly one batch per channel and "resend from T + 1" never skips a
  flush.
- **Local snapshots.** Every ``snapshot_every`` processed batches per input channel
  (``snapshot_every`` times the number of inputs), and for a stateful operator once it
  has also processed ``snapshot_balance`` times as many records and events as its state
  held entries at its last snapshot (a large state behind small batches is not stored
  whole every few records; a replacement replays about as much as it restored), an
  instance persists, in
  its own store slot, its operator state, per-input positions, clock, diff log and payload
  log (the payload log, because batches in flight when it crashes must be resent). No
  instance waits for another. A sink also persists, with every output it makes visible
  and in the same step (spec causal.md S1), per input channel the position of the last
  batch made visible, and the diff-log entries and counts per record identity that
  changed since its previous output: one delta of a chain that starts after each local
  snapshot (refs ``SINK_REF + j``; a chain at its longest ends in a snapshot). A
  replacement sink restores the snapshot, then the chain, and stands exactly where its
  last output left it: its parents resend after those positions, so nothing visible
  arrives again whatever order the channels interleave in (spec E4).
  Operators without state (map, filter, flat_map) persist nothing (spec R3): a
  replacement starts from T* and t_min, given with its plan, with or without event time.
  The ``RESUME`` marker each parent puts before a resend carries the channel's watermark
  as of the batch before the resume point (a trimmed payload log keeps the watermark of
  its last trimmed batch), so the replacement holds its predecessor's per-channel
  watermarks at T* before it runs an event. A marker names the incarnation of the child
  it is for, and a child ignores one for an earlier incarnation. Round-robin output is not
  part of any state: an event at time t sends its records to channel t mod n.
- **Garbage collection.** When an instance reports a snapshot, its parents drop payload
  log entries up to the snapshot's level-1 clock entries (sender times, spec T2) and its
  children drop diff-log entries about it up to the snapshot's time: a replacement never
  needs older ones. A stateless instance's parents trim to its T* at g, the lowest time
  it can restart from (``Durable``/``Covered``, spec T2, T3). A stateless instance has
  no snapshot to trim by: every 10 snapshot intervals of its g, its children fold the
  prefix of their diff logs about it whose instances at levels 1..f all sit at or below
  their own g into one merged entry (``FoldDiffLog``, spec T3): T* merges those entries
  anyway and none is replayed, so a shard's snapshot no longer carries every event of
  the sharder.

Recovery of a failed instance B (nobody else stops, pauses or rolls back):

1. B' restores B's newest local snapshot (a stateless B' none: R is T*, and each child's
   t_j is at most the B-time its newest snapshot holds, so B' regenerates all a child may
   ask for again) and holds all input. It reports ``Restored`` with its restore clock R;
   with the plan, the coordinator asks each parent A to resend from
   sender time 1 + R[A] (spec R4; a parent restarting in the same component gets no
   resend: its replacement's regenerated output, filtered there, is the resend).
2. The coordinator asks B's children (``Query`` controls, ``Answer`` reports) for their
   position on the channel from B and the diffs in which B appears: B's time and the
   parent batch (parent id, parent time) that caused it. ``t_min`` is the smallest B time
   the children have seen, T* applies every B diff up to it to an all-zero clock.
3. The plan tells B' where to resume to each child (1 + t_j, the child's level-1 entry
   for B: regenerated batches with an older sender time are filtered, i.e. duplicates are
   never sent, spec R5) and the observed
   events in B-time order. B' processes its parents' batches in exactly that order
   (**execution replay**), so the batches it regenerates are the ones its children saw;
   batches that no child observed are processed afterwards in arrival order. Before the
   replay a non-source B' checks that every B-time between its restored time and the
   newest one a child saw is in the plan (spec R7: with no silent events the child that
   saw the newest logged them all); after it, that its clock covers T* (R8). Either
   failing is ``CausalIncomplete``, an internal error that ends the run, never a
   fallback.
4. A receiver still drops a batch whose ``seq`` is not the next on its channel (a FIFO
   gap check); a sink's positions are durable with each output (above).

Batches a parent's FIFO channel delivers before an observed one are processed first even if
unobserved. An unobserved batch processed after later observed ones cannot change what was
observed when, as in every operator here, a record's effect reaches a child on the channel
its key is routed to; operators that spread one key's effect over several output channels
(or round-robin output from several inputs) would need the full determinant log.

**Without clocks** (``clocks: off``, for measuring what the clocks cost, paper 000's
Fig. 3): batches carry no diff and no diff log is kept; local snapshots, payload logs and
sink de-duplication stay. With no record of the order children observed, every failure
takes the fallback below.

**Adjacent failures: ``depth`` is f** (spec causal.md M1-M5). The failed *component* is a
connected set of failed or still recovering instances (a recovering neighbour is restarted
again with the new failure); L is the number of instances on its longest directed path.
With L <= f the component alone restarts: each member's children (a restarted child
answers from its restored snapshot) and every instance reached from it through restarting
instances only, k <= f hops down, answer with what their diff logs say about it (at level
k, its cause at level k + 1 <= f + 1: why diffs keep f + 1 levels), and each member gets
its own plan. Nothing outside the component stops. A stateless replacement started from
T* has empty diff logs: what its predecessor logged about a parent A up to T*[A] is gone.
Until A's g reaches T*[A] (a snapshot of a stateful A, the children's durable clocks of a
stateless one), the replacement's recovery is not over: a failure of A joins it to A's
component (``exposed`` in the coordinator), so A reads those events through its
children's children, or the fallback names it.

**Beyond f (still exactly-once).** With L > f the causes of the most upstream member are
cut from every surviving diff, so its order cannot be read. Then the whole graph is
restarted from the sources in a new epoch (the lineage baseline applied to everything):
stale snapshots are ignored, and sinks keep their visible counts per record identity
(``protocols/shared/logged.py``: the record under ``multiset``, the key under the per-key
modes) so the recomputation only adds what was never visible, in any arrival order
(spec S2). The run's events get a
``causal-fallback`` with reason ``beyond-f``, the failed instances, the component, L and
f (or reason ``no-clocks`` under ``clocks: off``).

Modules: ``params`` (``CausalParams``), ``messages`` (inits, controls and reports),
``recovery`` (the pure plan: observations, t_min, T*, resume points, replay order),
``instance`` (``CausalInstance``), ``coordinator`` (``CausalCoordinator``), ``mutants``
(planted bugs) and ``spec`` (``SPEC``, what the registry holds); the tree clock and the
channel machinery are shared (``protocols/shared/``).
"""
