"""Exceptions users see. Each message names the field or setting and what was wrong with it."""


class SchedulerdError(Exception):
    """Root of every error schedulerd raises on purpose."""


class ConfigError(SchedulerdError):
    """A setting in config.toml or the environment is invalid."""


class ValidationError(SchedulerdError):
    """A job definition was refused; `field` names the offending input, `limit` the setting
    that bounds it when a size limit refused it (e.g. "jobs.max_params_bytes")."""

    def __init__(self, field: str, message: str, limit: str | None = None) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.limit = limit


class UnknownTaskError(ValidationError):
    """No handler is registered under this task type (in this process, or by a live worker);
    `task` names it. A refusal of the field "task", so it is a ValidationError too."""

    def __init__(self, task: str, message: str) -> None:
        super().__init__("task", message)
        self.task = task


class NotFoundError(SchedulerdError):
    """No such job or execution (or it belongs to another tenant)."""


class ConflictError(SchedulerdError):
    """The request cannot be applied to the object as it is (e.g. a deleted job); `field` names
    the input that conflicts."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class StaleVersionError(ConflictError):
    """The job is not at the version the request expected (If-Match): it was edited meanwhile."""


class TooLateError(SchedulerdError):
    """The execution settled before the cancel reached it (succeeded, failed, skipped): its
    outcome stands. `status` names it."""

    def __init__(self, message: str, status: str) -> None:
        super().__init__(message)
        self.status = status


class SchemaError(SchedulerdError):
    """The database lacks migrations this code needs (run `schedulerd migrate`, or start the daemon)."""


class DuplicateWorkerError(SchedulerdError):
    """Another live process holds this replica's [daemon].worker_id: two with one id would take
    over each other's executions at the same fence."""


class NotConfiguredError(ConfigError):
    """The request needs a setting this deployment has not set (a secret write without
    [secrets].key): the message names the setting. The API answers 409 `not_configured`."""


class UnsealError(SchedulerdError):
    """A sealed secret or signing key could not be opened: no [secrets].key or previous_keys entry
    has its key id, or it was sealed for another tenant or name (its associated data differs)."""
