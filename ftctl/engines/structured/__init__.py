"""Spark Structured Streaming as an engine target (``-p structured-streaming``).

A topology is compiled (``plan``) to streaming queries that run in a driver process of
their own (``query``, under spark-submit); ftctl feeds their file source (``feed``),
kills and restarts the driver (``driverproc``), and reads what ``foreachBatch`` wrote to
the sink store, keyed by batch id (``sinkdir``), to verify it against the golden run.
"""
