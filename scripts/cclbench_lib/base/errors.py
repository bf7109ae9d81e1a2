"""The errors every command reports as one line, `cclbench: error: ...`, with an exit code."""


class CclbenchError(Exception):
    """A problem the user can fix; printed as one line `cclbench: error: ...`."""

    def __init__(self, message, exit_code=1):
        super().__init__(message)
        self.exit_code = exit_code


class UsageError(CclbenchError):
    def __init__(self, message):
        super().__init__(message, 2)
