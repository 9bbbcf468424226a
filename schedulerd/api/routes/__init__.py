"""The /v1 endpoints, one router per resource, each scoped to the caller's tenant."""

from collections.abc import Awaitable, Callable

from fastapi import APIRouter

from schedulerd.api.routes import actions, apply, executions, jobs, lateness, notifications, operator, secrets, signing_keys, tenants
from schedulerd.api.services import Services
from schedulerd.tenants import Principal


def routers(services: Services, caller: Callable[..., Awaitable[Principal]]) -> list[APIRouter]:
    """In the order to include them: lateness first, so /v1/executions/late is not read as an execution id,
    and actions before jobs, so /v1/jobs/actions/pause is not read as a job id."""
    return [module.router(services, caller) for module in (lateness, actions, jobs, executions, operator, tenants, apply,
                                                                secrets, signing_keys, notifications)]
