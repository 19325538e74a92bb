"""The one exception tree of evalstream.

    EvalstreamError
    ├── InputError                  bad input from a user; the CLI prints it without a traceback
    │   ├── SignalDecodeError       a wire record that is not a valid signal (has a `reason`)
    │   ├── SuiteError              a suite file that does not load or validate (has a location)
    │   ├── PricingError            a pricing table that does not load
    │   └── WrongFileKindError      a file of another kind than the command reads (names the
    │                               kind it looks like and the command that reads it)
    ├── EvaluationError             raised inside an evaluator; becomes an `error` verdict
    │   └── RegexTimeoutError       a regular expression exceeded its time bound
    ├── TargetError                 an agent under evaluation failed (raised, exited non-zero,
    │                               answered HTTP 5xx, wrote bad signals); the sample errors
    └── KafkaLauncherError          the dev/test broker could not start
                                    (evalstream.stream.dev_kafka)

Warnings (Python `warnings`, not raised): SuiteWarning (UserWarning), a suite that loads
but likely not as its author meant; the message carries file:line:column and the fix.

Control flow is not an error: a duplicate or late signal is a return status, not an exception.
"""

from __future__ import annotations


class EvalstreamError(Exception):
    """Root of every exception evalstream raises on purpose."""


class InputError(EvalstreamError):
    """Input a user supplied is wrong; the message names the problem and the fix."""


class SignalDecodeError(InputError):
    """A record could not be decoded as a signal.

    `reason` is a short, stable code (used as a metric label and the dead-letter reason).
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class SuiteError(InputError):
    """A suite failed to load or validate; `str()` carries file:line:column."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        column: int | None = None,
        path: str | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.line = line
        self.column = column
        self.path = path
        super().__init__(self.render())

    def render(self) -> str:
        return located(self.message, self.file, self.line, self.column, self.path)


def located(
    message: str,
    file: str | None,
    line: int | None = None,
    column: int | None = None,
    path: str | None = None,
) -> str:
    """`file:line:column: path: message`, the form of every suite error and warning."""
    where = file or "<suite>"
    if line is not None:
        where += f":{line}"
        if column is not None:
            where += f":{column}"
    field = f" {path}:" if path else ""
    return f"{where}:{field} {message}"


class SuiteWarning(UserWarning):
    """A suite loaded with a guess the author should confirm (e.g. an unquoted `null`)."""


class PricingError(InputError):
    """A pricing table could not be loaded."""


class WrongFileKindError(InputError):
    """A file that looks like another kind than the command reads
    (`evalstream.assertions.file_kinds`)."""


class EvaluationError(EvalstreamError):
    """An evaluator could not decide; the assertion's verdict becomes `error`."""


class RegexTimeoutError(EvaluationError):
    """A regular expression ran longer than its bound (a pathological pattern or input)."""


class TargetError(EvalstreamError):
    """A target (the agent run for a dataset case) failed; `kind` is `target` or `signals`."""

    def __init__(self, message: str, *, kind: str = "target") -> None:
        super().__init__(message)
        self.kind = kind
