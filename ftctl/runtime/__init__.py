"""The sans-IO runtime: operators, channels and instances as state machines.

Nothing here opens a socket, reads a clock or sleeps; hosts (simulation, Spark) feed
events in and perform the actions that come out.
"""
