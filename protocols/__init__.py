"""Fault-tolerance protocols: pure decision logic, no sockets, Spark or clocks."""
