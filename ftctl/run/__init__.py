"""Runs on the Spark host, below the commands: ``execute`` (cluster, session, host, verdict,
run directory), ``chaos`` (the nemesis and recovery report a run with faults adds) and
``capture`` (what compare and the Spark figures keep from a run).
``ftctl run``, ``ftctl chaos`` and ``ftctl compare protocols`` drive them."""
