"""Fault injection: the fault types, the scenario scheduler (the nemesis), scenario files.

Modules: ``context`` (the FaultContext protocol faults act through, and their records),
``faults`` (one class per process-level fault type), ``containers`` (the docker
backend's container faults), ``registry`` (every fault type by name), ``schedule``
(scenario -> planned faults), ``plan`` (a run's schedule from --kill or a scenario file,
checked against the cluster and the protocol), ``nemesis`` (runs a schedule in a thread,
records and replays it), ``hostctx`` (a FaultContext from a host's clock and task pids
plus a cluster backend), ``procs`` (signals to process trees), ``arrivals``
(restore-capacity arrival times).
"""
