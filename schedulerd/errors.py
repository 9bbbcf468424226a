"""Exceptions users see. Each message names the field or setting and what was wrong with it."""


class SchedulerdError(Exception):
    """Root of every error schedulerd raises on purpose."""


class ConfigError(SchedulerdError):
    """A setting in config.toml or the environment is invalid."""


class ValidationError(SchedulerdError):
    """A job definition was refused; `field` names the offending input."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class NotFoundError(SchedulerdError):
    """No such job or execution (or it belongs to another tenant)."""
