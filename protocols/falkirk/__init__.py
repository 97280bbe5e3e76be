"""``falkirk``: rollback recovery with per-operator policies (Isard & Abadi, Falkirk Wheel).

Every event carries a logical time; after a failure the coordinator picks, per instance,
a *frontier* (a downward-closed set of times) to keep, as the greatest consistent
fixed point of the paper's Figure 6 over what each instance persisted. Only instances
whose frontier moved roll back; logged edges act as firewalls and are replayed.

Pure modules: ``frontier`` (time domains), ``model`` (instances, edges, the metadata Xi),
``fixedpoint`` (Figure 6), ``recovery`` (who rolls back, replay, discards), ``gc``
(low-watermark), ``policy`` and ``params`` (per-operator policies), ``selective``
(restoring a filtered history), ``examples`` (the paper's worked examples as data).
"""
