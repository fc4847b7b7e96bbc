"""A host's spool (fleet/spool.py, spools.py) and the head's delivery marks (fleet/delivery.py), without
Ray: a writer killed with SIGKILL mid-burst loses none of the events it spooled; another host adopts its spool and
offers the unacknowledged tail; the head delivers each event once; a fully delivered spool is deleted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

from fleet.delivery import Delivery
from fleet.spool import Spool
from fleet.spools import HostSpools
from tests.support.app_helpers import REPO

WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from fleet.spool import Spool
    spool = Spool.create(Path(sys.argv[1]), "dying")
    for i in range(int(sys.argv[2])):
        spool.append({"type": "answer", "answer": str(i), "_snapshot": b"\\xff\\x00"})
    print(spool.id, flush=True)
    time.sleep(60)
    """
)


def spool_of_a_killed_writer(folder, count: int) -> str:
    """The id of a spool whose writer appended `count` events and was then killed with SIGKILL."""
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(folder), str(count)], cwd=REPO, stdout=subprocess.PIPE)
    spool_id = writer.stdout.readline().decode().strip()
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait(30)
    return spool_id


def test_a_killed_writers_tail_is_delivered_once_by_the_host_that_adopts_it(tmp_path) -> None:
    folder = tmp_path / "fleet-spool"
    spool_id = spool_of_a_killed_writer(folder, 50)
    head = Delivery()
    # what the head had delivered before the writer died: the first 30, only 20 of them acknowledged
    first = Spool.adopt(folder / f"{spool_id}.spool")
    for item in first.unsent()[:30]:
        assert head.fresh("dead", item)
        head.delivered(item)
    first.ack(20)
    first.close()
    head.lost("dead")

    host = HostSpools(folder, "heir")  # adopts the orphan at start
    assert set(host.adopted) == {spool_id}
    replay = host.unsent()
    assert [item["_spool"] for item in replay] == [[spool_id, seq] for seq in range(21, 51)]
    assert replay[0]["_snapshot"] == b"\xff\x00"  # bytes survive the file
    assert head.replayed("heir", replay[0])  # its writer is dead
    # after the head's death a new host on the box has the dead one's name: the adopter's mark still tells
    assert head.replayed("dying", replay[0]) and not head.replayed("dying", {**replay[0], "_replay": None})
    delivered = []
    for item in replay:
        if head.fresh("heir", item):
            delivered.append(item["answer"])
            head.delivered(item)
    assert delivered == [str(i) for i in range(30, 50)] and head.repeats == 10  # each once: 30..49 new
    host.ack(head.acks_for("heir"))
    assert not (folder / f"{spool_id}.spool").exists()  # all of it delivered: the orphan is gone
    host.close(delivered=True)
    assert list(folder.iterdir()) == []


def test_a_torn_last_line_is_cut_and_a_live_hosts_spool_is_never_adopted(tmp_path) -> None:
    folder = tmp_path / "fleet-spool"
    live = HostSpools(folder, "live")
    live.append({"type": "answer", "answer": "kept"})
    spool_id = spool_of_a_killed_writer(folder, 3)
    path = folder / f"{spool_id}.spool"
    with open(path, "ab") as file:
        file.write(b'{"seq": 4, "event": {"ty')  # the write a SIGKILL cut short
    other = HostSpools(folder, "other")
    assert set(other.adopted) == {spool_id}  # not the live host's
    assert [item["answer"] for item in other.unsent()] == ["0", "1", "2"]
    other.ack({spool_id: 2})
    other.close(delivered=True)  # one event left: the file stays for the next host
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[-1] == {"ack": 2} and len(lines) == 4
    again = HostSpools(folder, "again")
    assert [item["answer"] for item in again.unsent()] == ["2"]
    again.close(delivered=False)
    live.close(delivered=False)


def test_a_hosts_own_events_are_not_a_replay_and_an_orphan_of_its_own_name_is(tmp_path) -> None:
    # a head restart: the box's new host "gate" adopts the spool the killed run's "gate" left behind
    folder = tmp_path / "fleet-spool"
    spool_id = spool_of_a_killed_writer(folder, 3)
    host = HostSpools(folder, "dying")  # the writer's own name
    host.append({"type": "answer", "answer": "new"})
    items = host.unsent()
    head = Delivery()
    replays = [item for item in items if head.replayed("dying", item)]
    assert [item["_spool"][0] for item in replays] == [spool_id] * 3
    assert [item["answer"] for item in items if not head.replayed("dying", item)] == ["new"]
    host.close(delivered=False)
