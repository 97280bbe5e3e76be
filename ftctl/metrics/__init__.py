"""Metrics computed from a run's events and time series: recovery latency, plots."""
