"""POST /v1/apply: schedules as code (schedulerd/apply.py) for the caller's tenant: the declared
jobs of a source made true in one transaction, or (dry_run) the plan of it."""

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from schedulerd import apply
from schedulerd.api import schemas
from schedulerd.api.errors import ERRORS
from schedulerd.api.routes.jobs import edited_view
from schedulerd.api.services import Services
from schedulerd.api.views import job_view
from schedulerd.tenants import Principal


def plan_view(plan: apply.Plan) -> dict[str, Any]:
    """An apply's plan as JSON values (schemas.ApplyPlan)."""

    def named(name: str | None, job: Any) -> dict[str, Any]:
        return {"name": name, "job": job_view(job, job.updated_at).model_dump(mode="json")}

    return {
        "tenant": plan.tenant, "source": plan.source, "applied": plan.applied,
        "added": [named(a.name, a.job) for a in plan.added],
        "changed": [{"name": c.name, "fields": list(c.fields), "drifted": c.drifted, "edit": edited_view(c.edit)}
                    for c in plan.changed],
        "removed": [named(r.name, r.job) for r in plan.removed], "unchanged": plan.unchanged,
        "undeclared": [named(r.name, r.job) for r in plan.undeclared],
        "drifted": [{"name": d.name, "job_id": str(d.job.id), "version": d.job.version,
                     "applied_version": d.applied_version, "fields": list(d.fields)} for d in plan.drifted],
    }  # fmt: skip


def router(services: Services, caller: Callable[..., Awaitable[Principal]]) -> APIRouter:
    api = APIRouter(prefix="/v1", responses=ERRORS)
    applier = apply.Apply(services.store, services.intake, services.jobs)
    Caller = Annotated[Principal, Depends(caller)]

    @api.post("/apply", response_model=schemas.ApplyPlan, tags=["jobs"],
              summary="schedules as code: make this tenant's jobs of a source what the declarations say, in one "
                      "transaction (dry_run: the plan only); 409 when a job drifted (edited elsewhere) and not force")  # fmt: skip
    async def apply_jobs(
        body: schemas.ApplyRequest, who: Caller,
        dry_run: Annotated[bool, Query(description="answer the plan; write nothing")] = False,
    ) -> Any:  # fmt: skip
        declared = apply.declarations(body.jobs, who.tenant, "jobs")
        plan = await applier.apply(declared, tenant=who.tenant, source=body.source, plan_only=dry_run,
                                   prune=body.prune, force=body.force)  # fmt: skip
        return plan_view(plan)

    return api
