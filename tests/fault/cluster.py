"""A real Redis Cluster of this test's own: Debian's redis-server with --cluster-enabled yes on free
loopback ports in a temp dir, joined by `redis-cli --cluster create`, torn down afterwards.
Masters can be killed (a replica is promoted) and slots migrated by hand (MOVED/ASK windows)."""

from __future__ import annotations

import random
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import redis

NODE_TIMEOUT_MS = 2000  # a master silent this long is failed over (fast for tests, slow enough for a busy CI box)


@dataclass
class Node:
    port: int
    directory: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5, decode_responses=True)

    def node_id(self) -> str:
        with self.client() as client:
            return client.execute_command("CLUSTER", "MYID")

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


def _free_port_pair() -> int:
    """A free port whose cluster bus port (+10000) is free too; Redis needs it at most 55535."""
    while True:
        port = random.randrange(20000, 55535)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 10000))
            return port
        except OSError:
            continue


def tools_present() -> bool:
    return bool(shutil.which("redis-server") and shutil.which("redis-cli"))


class RedisClusterServers:
    """`masters` masters, each with `replicas_per_master` replicas, slots spread evenly."""

    def __init__(self, directory: Path, masters: int = 3, replicas_per_master: int = 0) -> None:
        self.directory = directory
        self.replicas_per_master = replicas_per_master
        self.nodes = [Node(_free_port_pair(), directory / f"node-{i}") for i in range(masters * (1 + replicas_per_master))]

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.nodes[0].port}"

    def start(self) -> None:
        for node in self.nodes:
            node.directory.mkdir(parents=True, exist_ok=True)
            log = (node.directory / "redis.log").open("wb")
            node.process = subprocess.Popen(
                [shutil.which("redis-server") or "redis-server", "--port", str(node.port), "--bind", "127.0.0.1",
                 "--cluster-enabled", "yes", "--cluster-config-file", str(node.directory / "nodes.conf"),
                 "--cluster-node-timeout", str(NODE_TIMEOUT_MS), "--save", "", "--appendonly", "no",
                 "--dir", str(node.directory), "--maxmemory-policy", "noeviction"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        for node in self.nodes:
            self._wait(lambda n=node: n.client().ping(), f"node {node.address} answering")
        subprocess.run(
            ["redis-cli", "--cluster", "create", *(n.address for n in self.nodes),
             "--cluster-replicas", str(self.replicas_per_master), "--cluster-yes"],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
        self._wait(self._healthy, "cluster state ok on every node with every replica in sync")

    def _healthy(self) -> bool:
        for node in self.nodes:
            if not node.alive():
                continue
            with node.client() as client:
                if "cluster_state:ok" not in client.execute_command("CLUSTER", "INFO"):
                    return False
                info = client.info("replication")
                if info["role"] == "slave" and info.get("master_link_status") != "up":
                    return False
        return True

    @staticmethod
    def _wait(check, what: str, timeout_s: float = 30.0) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if check():
                    return
            except (redis.ConnectionError, redis.ResponseError):
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"Redis Cluster: not {what} within {timeout_s} s")
            time.sleep(0.05)

    def any_live(self) -> Node:
        return next(n for n in self.nodes if n.alive())

    def slot_owner(self, slot: int) -> Node:
        """The master serving `slot`, as the cluster says now."""
        with self.any_live().client() as client:
            for start, end, master, *_ in client.execute_command("CLUSTER", "SLOTS"):
                if start <= slot <= end:
                    return next(n for n in self.nodes if n.port == int(master[1]))
        raise AssertionError(f"slot {slot} is not served")

    def keyslot(self, key: str) -> int:
        with self.any_live().client() as client:
            return int(client.execute_command("CLUSTER", "KEYSLOT", key))

    def masters(self) -> list[Node]:
        found = []
        for node in self.nodes:
            if node.alive():
                with node.client() as client:
                    if client.info("replication")["role"] == "master":
                        found.append(node)
        return found

    def kill(self, node: Node) -> None:
        assert node.process is not None
        node.process.send_signal(signal.SIGKILL)
        node.process.wait(timeout=10)

    def wait_failed_over(self, slot: int, dead: Node, timeout_s: float = 30.0) -> Node:
        """Wait until a replica of the killed master serves `slot` and the cluster is ok again."""
        self._wait(lambda: self.slot_owner(slot) is not dead and self._state_ok(), "failed over", timeout_s)
        return self.slot_owner(slot)

    def _state_ok(self) -> bool:
        return all("cluster_state:ok" in n.client().execute_command("CLUSTER", "INFO") for n in self.nodes if n.alive())

    def migrate_slot(self, slot: int, target: Node, *, pause_s: float = 0.0, batch: int = 10) -> int:
        """Move `slot` to `target` as `redis-cli --cluster reshard` does (IMPORTING/MIGRATING, MIGRATE
        the keys a few at a time with a pause between, then SETSLOT NODE everywhere): while it
        runs, clients get ASK (and TRYAGAIN for multi-key commands), after it MOVED. Returns keys moved."""
        source = self.slot_owner(slot)
        assert source is not target
        source_id, target_id = source.node_id(), target.node_id()
        moved = 0
        with source.client() as src, target.client() as dst:
            dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
            src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
            while keys := src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, batch):
                src.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *keys)
                moved += len(keys)
                time.sleep(pause_s)
            for node in self.masters():
                with node.client() as client:
                    client.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)
        return moved

    def stop(self) -> None:
        for node in self.nodes:
            if node.alive():
                assert node.process is not None
                node.process.kill()
                node.process.wait(timeout=10)
