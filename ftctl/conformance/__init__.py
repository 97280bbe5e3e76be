"""The conformance kit: every registered protocol's guarantee and mutants on every topology."""
