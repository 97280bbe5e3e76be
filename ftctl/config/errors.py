"""The one error type a user's bad input raises; the CLI prints it on one line, exit 2."""

from __future__ import annotations


class ConfigError(Exception):
    """Bad user input: names the file, the field and (where known) the line."""

    def __init__(self, file: str, field: str | None, message: str, line: int | None = None):
        # Whatever a user wrote is echoed escaped: the error stays the one line promised.
        self.file = one_line(file)
        self.field = one_line(field) if field is not None else None
        self.message = one_line(message)
        self.line = line
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}"
        if self.field:
            return f"{where}: {self.field}: {self.message}"
        return f"{where}: {self.message}"


def one_line(text: str) -> str:
    """``text`` with control characters (a newline in an operator's type, a tab in a
    key) escaped as ``repr`` escapes them."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)
