"""Configuration: topology and chaos-scenario files, validated with pydantic.

Import from the submodules (``ftctl.config.topology``, ``ftctl.config.errors``, ...):
this package imports nothing itself, so the CLI can raise a ``ConfigError`` without
loading pydantic.
"""
