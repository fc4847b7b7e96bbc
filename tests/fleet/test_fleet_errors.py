"""What `--ray` refuses, each with exit code 2 and the reason: a head that does not answer (at once, not after
Ray's minutes of retries), a malformed address, a pin without a fleet, a cluster with no box that offers hosts,
and one without room for the configured streams (with each host's room). Each through `main([...])` in this
process (what is checked is the exit and its message, not the process boundary)."""

from __future__ import annotations

import threading

import pytest

from app.__main__ import main
from tests.support.app_helpers import video
from tests.support.mqtt_broker import free_port
from tests.support.ray_cluster import add_host_node, ray_cluster

pytest.importorskip("ray")


def run_main(capsys, *argv: str, timeout: float = 300) -> tuple[int, str]:
    """(exit code, stderr) of `main(argv)`; AssertionError when it has not returned within `timeout` seconds."""
    done: dict[str, object] = {}

    def run() -> None:
        try:
            done["code"] = main(list(argv))
        except SystemExit as exit:
            done["code"] = exit.code

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout)
    assert not worker.is_alive(), f"main{argv} did not return within {timeout} s"
    return done["code"], capsys.readouterr().err


def test_a_head_that_does_not_answer_or_a_malformed_address_exits_2_at_once(capsys):
    port = free_port()
    # Ray alone retries a dead address for minutes: the bound on the run is the check that it does not hang
    code, err = run_main(capsys, "--ray", f"127.0.0.1:{port}", "--video", str(video(8)), "--model", "tiny", timeout=90)
    assert code == 2
    assert f"no Ray head answers at 127.0.0.1:{port}" in err and "ray start --head" in err
    code, err = run_main(capsys, "--ray", "head-without-port", "--video", str(video(8)), "--model", "tiny")
    assert code == 2 and "--ray takes auto or HOST:PORT" in err


def test_a_pinned_stream_without_a_fleet_is_refused(tmp_path, capsys):
    site = tmp_path / "site.toml"
    site.write_text(f'[streams.door]\nsource = "{video(8)}"\nnode = "garage"\n')
    code, err = run_main(capsys, "--config", str(site), "--model", "tiny")
    assert code == 2 and "name a node: that is for a fleet (add --ray ADDRESS)" in err


def test_a_cluster_without_hosts_or_without_room_exits_2_with_the_reason(capsys):
    clip = str(video(8))
    with ray_cluster([]) as (cluster, _):  # one cluster: first without a box that offers hosts, then with one
        code, err = run_main(capsys, "--ray", cluster.address, "--video", clip, "--model", "tiny")
        assert code == 2
        assert "no node of the cluster offers the resource 'edge_host'" in err
        assert "--resources='{\"edge_host\": 1}'" in err
        add_host_node(cluster, "a")
        cluster.wait_for_nodes()
        code, err = run_main(
            capsys, "--ray", cluster.address, "--stream", f"one={clip}", "--stream", f"two={clip}", "--max-streams",
            "1", "--model", "tiny",
        )  # fmt: skip
    assert code == 2, err[-2000:]
    assert "the cluster has no room for 1 of the 2 streams" in err
    assert "streams each host fits: a-" in err and ": 1." in err
