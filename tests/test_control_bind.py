"""The driver's control channel: a settable listen address, and the run token enforced."""

from __future__ import annotations

import queue
import socket
import threading
from multiprocessing import AuthenticationError
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ftctl.cli import app
from ftctl.cluster.process import wait_until
from ftctl.spark import wire
from ftctl.spark.driver import EV_REG, ControlServer
from ftctl.spark.identity import this_process

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()


def _server(bind: str = wire.HOST) -> tuple[ControlServer, queue.Queue[Any], list[str], bytes]:
    token = wire.new_token()
    events: queue.Queue[tuple[Any, ...]] = queue.Queue()
    refused: list[str] = []
    return ControlServer(token, events, bind, refused.append), events, refused, token


def test_a_connection_without_the_token_is_refused_and_reported() -> None:
    server, events, refused, token = _server()
    try:
        with pytest.raises(AuthenticationError):
            wire.connect(server.address, wire.new_token())
        assert wait_until(lambda: len(refused) == 1, 5)
        host, port = refused[0].rsplit(":", 1)
        assert host == "127.0.0.1" and int(port) > 0
        assert events.empty(), "nothing from an unauthenticated peer reaches the host"
        # The listener keeps serving the run's own tasks afterwards.
        conn = wire.connect(server.address, token)
        me = this_process()
        assert me is not None
        wire.send(conn, (wire.REG, 0, "count[0]", 123, ("127.0.0.1", 1), "exec-1",
                         me.to_wire(), "127.0.0.1:7078", 0.012))
        kind, iid, inc, pid, _addr, _conn, executor, who, worker, restore_s = events.get(
            timeout=5)
        assert (kind, iid, inc, pid, executor) == (EV_REG, "count[0]", 0, 123, "exec-1")
        assert who == me, "where the task runs reaches the host, for its pid checks"
        assert (worker, restore_s) == ("127.0.0.1:7078", 0.012)
        conn.close()
    finally:
        server.close()


def test_raw_bytes_without_the_handshake_are_refused() -> None:
    server, events, refused, _ = _server()
    try:
        with socket.create_connection(server.address, timeout=5) as raw:
            raw.recv(1024)  # the challenge
            raw.sendall(b"\x00\x00\x00\x05hello")
            with pytest.raises((ConnectionError, TimeoutError)):
                while raw.recv(1024):  # the failure notice, then the close
                    pass
                raise ConnectionError
        assert wait_until(lambda: len(refused) == 1, 5)
        assert events.empty()
    finally:
        server.close()


def test_bind_to_all_addresses_advertises_a_reachable_one() -> None:
    server, events, _, token = _server("0.0.0.0")
    try:
        assert server.listener.address[0] == "0.0.0.0"
        assert server.address[0] not in wire.WILDCARDS
        assert server.address[1] == server.listener.address[1]
        conn = wire.connect(server.address, token)
        wire.send(conn, (wire.REG, 0, "src[0]", 1, ("127.0.0.1", 1)))
        assert events.get(timeout=5)[0] == EV_REG
        conn.close()
    finally:
        server.close()


def test_default_bind_is_loopback() -> None:
    server, *_ = _server()
    try:
        assert server.address[0] == "127.0.0.1"
    finally:
        server.close()


@pytest.mark.parametrize("command", [["run"], ["chaos", "--kill", "1"]])
def test_an_address_this_machine_cannot_listen_on_is_one_line_exit_2(
        command: list[str], tmp_path: Path) -> None:
    result = runner.invoke(app, [*command, str(ROOT / "topologies" / "wordcount.yaml"),
                                 "--bind", "203.0.113.7", "--results", str(tmp_path)])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "--bind" in lines[0] and "203.0.113.7" in lines[0], lines
    assert not any(tmp_path.iterdir()), "nothing written for a refused command"


def _this_hosts_address() -> str:
    """An IPv4 address of this machine off loopback (every test host has a network)."""
    import psutil

    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family == socket.AF_INET and not a.address.startswith("127."):
                return str(a.address)
    raise AssertionError("this machine has no IPv4 address off loopback")


@pytest.mark.parametrize("bind", ["127.0.0.1", "off-loopback"])
def test_a_tasks_data_listener_binds_where_it_reaches_the_driver(bind: str) -> None:
    """Upstream tasks on other hosts must reach a task's data listener: it listens on the
    interface its control connection uses (loopback only while the driver is there)."""
    from ftctl.config.load import load_topology
    from ftctl.spark.task import InstanceTask, TaskPayload
    from protocols.contract.events import Started
    from protocols.contract.names import InstanceId

    address = _this_hosts_address() if bind == "off-loopback" else bind
    server, _, _, token = _server(address)
    topology = load_topology(ROOT / "topologies" / "wordcount.yaml")
    task = InstanceTask(TaskPayload(
        run_id="r", instance="count[0]", inc=0, protocol="none", params={},
        topology=topology.model_dump(by_alias=True),
        started=Started(InstanceId("count[0]"), 0, "start"), coordinator=server.address,
        token=token))
    try:
        assert task.listener is not None
        assert task.listener.address[0] == address
        threading.Thread(target=task._acceptor, daemon=True).start()
        wire.connect(task.listener.address, token).close()  # a peer with the token gets in
    finally:
        task._close()
        server.close()


def test_the_driver_jvm_binds_with_the_control_channel() -> None:
    from ftctl.spark.session import driver_conf

    assert driver_conf("127.0.0.1") == {}  # spark_conf's loopback defaults
    address = _this_hosts_address()
    assert driver_conf(address) == {"spark.driver.bindAddress": address,
                                    "spark.driver.host": address}
    wildcard = driver_conf("0.0.0.0")
    assert wildcard["spark.driver.bindAddress"] == "0.0.0.0"
    assert wildcard["spark.driver.host"] not in wire.WILDCARDS
