"""Runs on the Spark host, below the commands: ``execute`` (cluster, session, host, verdict,
run directory) and ``chaos`` (the nemesis and recovery report a run with faults adds).
``ftctl run``, ``ftctl chaos`` and ``ftctl compare protocols`` drive them."""
