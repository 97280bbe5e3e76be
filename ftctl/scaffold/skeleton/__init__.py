"""The package ``ftctl new protocol`` copies (renamed): importable, so it is linted,
type-checked and run by the conformance kit like any protocol."""
