"""The Ray cluster a campaign runs on: start a local one or join one (`ray.address`), the cores
the scheduler hands out, what each stage's actors need, and whether the cluster can host them
(checked before any actor starts: Ray would leave an actor it cannot place pending forever)."""
from __future__ import annotations

import logging
import math
import os
import socket
from collections import Counter
from typing import Any

import ray

from campaign.config import Config
from campaign.driver.errors import CampaignError, last_line
from campaign.driver.stages import GEN
from campaign.driver.starts import Placement, fmt_resources, placement_reason

log = logging.getLogger(__name__)

#: per stage (GEN, then each backend): (number of actors, Ray resources of each)
Needs = dict[str, tuple[int, dict[str, float]]]


def campaign_cores(cfg: Config, started_local: bool) -> int:
    """The cores the scheduler hands out: `campaign.cores`, else this machine's for a local
    cluster we started, else the cluster's CPUs."""
    if cfg.campaign.cores is not None:
        return cfg.campaign.cores
    if started_local:
        return os.cpu_count() or 1
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def actor_needs(cfg: Config, targets: dict[str, str]) -> Needs:
    """Per stage (GEN, then each backend): (number of actors, Ray resources of each)."""
    c = cfg.campaign
    needs = {GEN: (c.workers, {"CPU": c.generation.num_cpus, **c.generation.resources})}
    for b in c.backends:
        o = c.options(b)
        gpus = o.num_gpus if o.num_gpus is not None else (1.0 if targets[b] == "cuda" else 0.0)
        needs[b] = (c.actors_of(b), {"CPU": o.num_cpus, "GPU": gpus, **o.resources})
    return {k: (n, {r: v for r, v in res.items() if v > 0}) for k, (n, res) in needs.items()}


def _where(stage: str, cfg: Config) -> str:
    """The config field that sets a stage's resources (for error messages)."""
    return ("campaign.generation" if stage == GEN
            else f"campaign.backend_options.{stage}")


def check_resources(cfg: Config, needs: Needs,
                    nodes: list[dict[str, float]] | None = None,
                    cluster: str = "the Ray cluster") -> None:
    """Fail fast when the cluster (`nodes`: each node's resources; default: the connected
    cluster's live nodes) cannot hold the actors (Ray would leave them pending forever)."""
    if nodes is None:
        nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
    total: Counter[str] = Counter()
    for nd in nodes:
        total.update(nd)
    have = lambda r: total.get(r, 0.0)  # noqa: E731
    for stage, (_n, res) in needs.items():
        what = "generation actor" if stage == GEN else f"backend {stage} actor"
        for r, amount in res.items():
            if have(r) <= 0:
                hint = (" (a cuda target: run on a cluster with a GPU node, ray.address=...)"
                        if r == "GPU" else " (declare it: ray start --resources=...)")
                raise CampaignError(
                    f"each {what} needs {r}={amount:g} ({_where(stage, cfg)}) but {cluster} "
                    f"has no {r}{hint}")
        if not any(all(node.get(r, 0.0) >= v for r, v in res.items()) for node in nodes):
            raise CampaignError(
                f"each {what} needs {fmt_resources(res)} ({_where(stage, cfg)}) but no node of "
                f"{cluster} has that much: {'; '.join(fmt_resources(_public(nd)) for nd in nodes)}")
    for r in {r for _, res in needs.values() for r in res}:
        want = sum(n * res.get(r, 0.0) for n, res in needs.values())
        if want > have(r) + 1e-9:
            parts = ", ".join(f"{n} x {res[r]:g} ({_where(s, cfg)})"
                              for s, (n, res) in needs.items() if res.get(r))
            raise CampaignError(
                f"the campaign's actors need {want:g} {r} in all ({parts}) but {cluster} "
                f"has {have(r):g}; lower campaign.workers or the actors/resources of a backend")


def _public(resources: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in resources.items() if not k.startswith("node:") and
            k not in ("memory", "object_store_memory")}


def node_name(node: dict[str, Any]) -> str:
    """A node as the messages name it: its address and the start of its id (nodes started on
    one machine share an address), and whether it is the head."""
    head = " (head)" if "node:__internal_head__" in node.get("Resources", {}) else ""
    return f"{node.get('NodeManagerAddress', '?')}/{node['NodeID'][:8]}{head}"


def placement(actor: Any, request: dict[str, float]) -> Placement:
    """What the cluster says of `actor`, still starting: placed (GCS's actor table gives it a
    process once a worker holds it), else why `request` is not met (`placement_reason`, from
    each live node's resources and what it has free). Anything unclear reads as placed: an
    actor is never given up on for want of an answer."""
    # GCS directly: ray.util.state needs the dashboard, which local clusters run without
    from ray._private.state import state as gcs

    try:
        info = gcs.actor_table(actor._actor_id.hex()) or {}
        nodes = {n["NodeID"]: n for n in ray.nodes() if n.get("Alive")}
        if info.get("State") != "PENDING_CREATION" or info.get("Pid") or \
                info.get("Address", {}).get("IPAddress"):
            node = nodes.get(info.get("Address", {}).get("NodeID", ""))
            return Placement(placed=True, node=node_name(node) if node else "")
        free = gcs.available_resources_per_node()
    except Exception as e:
        log.debug("placement of %s: %s", actor, e)
        return Placement(placed=True)
    if any(all(free.get(i, {}).get(r, 0.0) >= v for r, v in request.items()) for i in nodes):
        return Placement(placed=True)  # Ray is starting a process for it
    fits_nowhere, why = placement_reason(
        request, {node_name(n): n["Resources"] for n in nodes.values()},
        {node_name(n): free.get(i, {}) for i, n in nodes.items()})
    return Placement(placed=False, fits_nowhere=fits_nowhere, why=why)


def _auth_hint() -> str:
    return ("set RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) to the cluster's token, which "
            "`ray get-auth-token` prints on its head node (default file ~/.ray/auth_token)")


def join(address: str, temp_dir: str | None) -> None:
    """Join a running cluster with token authentication on (an explicit address would otherwise
    connect without a token), failing fast and saying so when the token is missing or wrong."""
    from ray._private.services import canonicalize_bootstrap_address
    from ray.exceptions import AuthenticationError

    if "RAY_AUTH_MODE" not in os.environ:  # an explicit choice (e.g. disabled) is kept
        from ray._private.authentication.authentication_token_setup import _enable_token_auth

        _enable_token_auth()  # this process and its children, as `ray.init()` of a new cluster
    try:
        gcs = canonicalize_bootstrap_address(address)
    except Exception as e:
        raise CampaignError(f"ray.address={address}: {last_line(e)}") from None
    if gcs is None:
        raise CampaignError(f"ray.address={address}: no running Ray cluster found on this "
                            "machine (start one with `ray start --head`)")
    host, _, port = gcs.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as e:
        raise CampaignError(f"ray.address={address}: nothing answers at {gcs} ({e})") from None
    # ignored attr-defined: ray's _raylet.pyi stub lacks these (the compiled module has them)
    from ray._raylet import (  # type: ignore[attr-defined]
        AuthenticationMode,
        AuthenticationTokenLoader,
        get_authentication_mode,
    )

    if (get_authentication_mode() == AuthenticationMode.TOKEN
            and not AuthenticationTokenLoader.instance().has_token(ignore_auth_mode=True)):
        raise CampaignError(f"ray.address={address}: token authentication is on but this "
                            f"driver has no token: {_auth_hint()}")
    try:
        from ray._raylet import GcsClient  # type: ignore[attr-defined]  # (as above)

        GcsClient(address=gcs)  # fails at once on a token the cluster refuses
    except AuthenticationError as e:
        raise CampaignError(f"ray.address={address}: the cluster refused this driver's "
                            f"authentication token ({last_line(e)}): {_auth_hint()}") from None
    except Exception as e:  # anything else: let ray.init report it
        log.debug("GCS probe of %s: %s", gcs, e)
    try:
        ray.init(address=gcs, logging_level=logging.WARNING, log_to_driver=False)
    except AuthenticationError as e:  # no token at all
        raise CampaignError(f"ray.address={address}: {last_line(e)}: {_auth_hint()}") from None
    except (ConnectionError, RuntimeError) as e:
        raise CampaignError(f"ray.address={address}: cannot connect: {last_line(e)}") from e


def start_ray(cfg: Config, needs: Needs) -> bool:
    """Start or join Ray as configured; return whether we started it (and so must stop it)."""
    if ray.is_initialized():
        return False
    if cfg.ray.address:
        join(cfg.ray.address, cfg.ray.temp_dir)
        return True
    cpus = cfg.ray.num_cpus
    if cpus is None:
        asked = sum(n * res.get("CPU", 0.0) for n, res in needs.values())
        cpus = max(os.cpu_count() or 1, math.ceil(asked - 1e-9))
    # what the local cluster will have, checked before spending seconds on starting it
    from ray._private.accelerators import get_accelerator_manager_for_resource

    gpu_manager = get_accelerator_manager_for_resource("GPU")
    assert gpu_manager is not None  # Ray always has one for "GPU" (NVIDIA's by default)
    gpus = gpu_manager.get_current_node_num_accelerators()
    check_resources(cfg, needs, [{"CPU": cpus, "GPU": gpus, **cfg.ray.resources}],
                    "the local Ray cluster (this machine; ray.address is unset)")
    ray.init(address="local", num_cpus=cpus, resources=dict(cfg.ray.resources) or None,
             include_dashboard=False, _temp_dir=cfg.ray.temp_dir,
             logging_level=logging.WARNING, log_to_driver=cfg.ray.log_to_driver)
    return True
