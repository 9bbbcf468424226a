"""The services every API route reaches: built once by create_app(), passed to each router."""

from __future__ import annotations

from dataclasses import dataclass

from schedulerd.config import Config
from schedulerd.intake import Intake, SharedBatches
from schedulerd.jobs import Jobs
from schedulerd.queue import DelayQueue, RequestCounter
from schedulerd.signing_keys import SigningKeys
from schedulerd.store import Store
from schedulerd.tenant_secrets import TenantSecrets
from schedulerd.tenants import Tenants


@dataclass(frozen=True)
class Services:
    jobs: Jobs
    store: Store
    queue: DelayQueue
    config: Config
    tenants: Tenants
    counter: RequestCounter
    intake: Intake  # batched creates
    shared: SharedBatches  # single creates, written together with concurrent ones
    reads: Store  # read-only views: the read replica's pool ([database].read_url), else `store`
    secrets: TenantSecrets
    signing_keys: SigningKeys
