"""The one error type a user's bad input raises; the CLI prints it on one line, exit 2."""

from __future__ import annotations


class ConfigError(Exception):
    """Bad user input: names the file, the field and (where known) the line."""

    def __init__(self, file: str, field: str | None, message: str, line: int | None = None):
        self.file = file
        self.field = field
        self.message = message
        self.line = line
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}"
        if self.field:
            return f"{where}: {self.field}: {self.message}"
        return f"{where}: {self.message}"
