"""ftctl: a chaos-testing harness for fault-tolerance protocols of streaming dataflows."""

__version__ = "0.1.0"
