"""The CI regression gate: a suite of topology x protocol x scenario cases."""
