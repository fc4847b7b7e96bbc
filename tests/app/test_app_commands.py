"""app/commands.py: the MQTT commands' view of the run (outputs.commands.Commands) over a real `RuntimeWatches`
and a fake assistant: watches owned by "mqtt" under the API's limits, only its own changed or removed, questions
bounded while they wait for answers, every refusal a `CommandError` with its code."""

from __future__ import annotations

import pytest

from app.commands import RunCommands
from bus import Answer, ErrorEvent
from bus.input_limits import AssistantBusy, InputLimits
from bus.stats import AnswerStats
from outputs.commands import CommandError
from watches.runtime import RuntimeWatches, WatchLimits
from watches.spec import WatchSpec


class FakeAssistant:
    def __init__(self) -> None:
        self.streams = {"door": object(), "yard": object()}
        self.limits = InputLimits(max_question_chars=50)
        self.asked: list[tuple] = []
        self.busy = False

    def desk_streams(self):  # the desk's streams by name (bus.desk): only names are read
        return dict.fromkeys(self.streams)

    def check_question(self, question: str) -> str:
        return self.limits.check(question)

    def ask(self, question, stream=None, request=None):
        text = self.check_question(question)
        if self.busy:
            raise AssistantBusy("busy: try again")
        self.asked.append((text, stream, request))
        return [stream] if stream else list(self.streams)

    def set_runtime_watches(self, specs, reasons=None, owners=None) -> None:
        pass


def run_commands(**limits) -> tuple[FakeAssistant, RuntimeWatches, RunCommands]:
    assistant = FakeAssistant()
    configured = [WatchSpec("gate", "Is the gate open?")]
    watches = RuntimeWatches(assistant, configured=configured, limits=WatchLimits(**limits))
    return assistant, watches, RunCommands(assistant, watches, questions=2)


def refused(call, *args) -> CommandError:
    with pytest.raises(CommandError) as err:
        call(*args)
    return err.value


def test_a_watch_added_by_command_is_the_runs_owned_by_mqtt_with_the_commands_spellings():
    _, watches, commands = run_commands()
    result = commands.watch(
        {"action": "add", "name": "parcel", "question": "Is there a parcel?", "stream": "door", "every_s": 5,
         "on_change": True, "expires_in_s": 3600, "one_shot": True}
    )  # fmt: skip
    watch = watches.get("parcel")
    assert watch.owner == "mqtt" and watch.one_shot and watch.expires_at is not None
    assert watch.spec == WatchSpec("parcel", "Is there a parcel?", streams=("door",), every=5, on_change=True)
    assert result["watch"]["streams"] == ["door"] and result["watch"]["owner"] == "mqtt"
    listed = commands.watch({"action": "list"})["watches"]
    assert [(w["name"], w["origin"]) for w in listed] == [("gate", "config"), ("parcel", "runtime")]
    changed = commands.watch({"action": "change", "name": "parcel", "threshold": 0.8, "never_expires": True})
    assert changed["watch"]["threshold"] == 0.8 and changed["watch"]["expires_at"] is None
    assert commands.watch({"action": "remove", "name": "parcel"}) == {"name": "parcel"}
    assert watches.list() == []


@pytest.mark.parametrize(
    ("command", "code", "words"),
    [
        ({"action": "add", "question": "q?", "colour": "red"}, "invalid", "colour"),
        ({"action": "add", "question": "q?", "every_s": 0.1}, "invalid", "every"),
        ({"action": "add", "question": "q?", "every_s": 5, "every": 5}, "invalid", "not both"),
        ({"action": "add", "question": "x" * 51}, "invalid", "too long"),
        ({"action": "add", "question": "q?", "stream": "garage"}, "not_found", "garage"),
        ({"action": "add", "name": "gate", "question": "q?"}, "conflict", "configured"),
        ({"action": "add", "name": "Bad Name!", "question": "q?"}, "invalid", "bad alert name"),
        ({"action": "remove", "name": "nothing"}, "not_found", "nothing"),
        ({"action": "remove", "name": "gate"}, "conflict", "configured"),
        ({"action": "remove"}, "invalid", "name"),
        ({"action": "change", "name": "gate", "threshold": 0.1}, "conflict", "configured"),
    ],
)
def test_bad_watch_commands_are_refused_with_a_code_changing_nothing(command, code, words):
    _, watches, commands = run_commands()
    err = refused(commands.watch, command)
    assert err.code == code and words in str(err), str(err)
    assert watches.list() == []


def test_commands_touch_only_their_own_watches_and_count_against_the_same_limits():
    _, watches, commands = run_commands(per_owner=2, total=3)
    watches.add({"name": "api-one", "question": "q?"}, owner="phone")  # the API's
    gone = refused(commands.watch, {"action": "remove", "name": "api-one"})
    assert gone.code == "conflict" and "phone" not in str(gone)  # every subscriber reads the result topic
    listed = {w["name"]: w["owner"] for w in commands.watch({"action": "list"})["watches"] if "owner" in w}
    assert listed == {"api-one": "api"}  # nor the token's name in a list
    assert refused(commands.watch, {"action": "change", "name": "api-one", "every": 5}).code == "conflict"
    commands.watch({"action": "add", "question": "one?"})
    commands.watch({"action": "add", "question": "two?"})
    over = refused(commands.watch, {"action": "add", "question": "three?"})
    assert over.code == "too_many" and "mqtt holds 2 watches" in str(over)  # mqtt is one owner, a token's share
    commands.watch({"action": "remove", "name": [w.spec.name for w in watches.list() if w.owner == "mqtt"][0]})
    watches.add({"name": "api-two", "question": "q?"}, owner="tablet")  # 3 in all again
    total = refused(commands.watch, {"action": "add", "question": "four?"})
    assert total.code == "too_many" and "3 watches are set" in str(total)


def test_questions_are_bounded_while_they_wait_and_freed_by_their_answers_and_errors():
    assistant, _, commands = run_commands()
    assert commands.ask("What?", "door", "mqtt-1") == ["door"]
    assert commands.ask("Who?", None, "mqtt-2") == ["door", "yard"]
    assert refused(commands.ask, "And?", "door", "mqtt-3").code == "busy"  # two wait already
    commands(Answer(stream="door", stats=AnswerStats(round=1), request="mqtt-1"))
    assert commands.ask("And?", "door", "mqtt-3") == ["door"]
    commands(Answer(stream="door", stats=AnswerStats(round=2), request="mqtt-2"))
    assert refused(commands.ask, "More?", "door", "mqtt-4").code == "busy"  # mqtt-2 still waits for yard
    commands(ErrorEvent(where="answer", message="failed", stream="yard", request="mqtt-2"))
    assert commands.ask("More?", "door", "mqtt-4") == ["door"]
    assert [r for _, _, r in assistant.asked] == ["mqtt-1", "mqtt-2", "mqtt-3", "mqtt-4"]


def test_question_refusals_carry_their_codes_and_hold_no_place():
    assistant, _, commands = run_commands()
    assert refused(commands.ask, "What?", "garage", "mqtt-1").code == "not_found"
    assert refused(commands.ask, "x" * 51, "door", "mqtt-2").code == "invalid"
    assistant.busy = True
    assert refused(commands.ask, "What?", "door", "mqtt-3").code == "busy"
    assistant.busy = False
    assert commands.ask("What?", "door", "mqtt-4") == ["door"]
    assert commands.ask("Who?", "door", "mqtt-5") == ["door"]  # the refused ones held no place
