"""The fleet: streams placed across machines with Ray (`python -m app --ray ADDRESS|auto`).

One host actor per box or GPU (`host.py`) loads the model once and runs the assistant for the streams placed on
it; the coordinator on the head (`coordinator.py`) places every stream on a host with room (`placement.py`),
routes questions to the stream's host, brings every host's events to the head's bus (the terminal, the page, MQTT
and the timeline run there, once) and places a lost host's streams again. The head (`head.py`) is driven through
app's front doors (the terminal, the page, the API), written once: `launch.py` is the launcher they take for a
fleet, with the fleet's desk (`api_assistant.py`, the page's commands in `page_commands.py`). Only this package
imports Ray, and only when `--ray` is given.

The fleet is the top room: it stands on app/ (each host runs app's one-box assistant, the head opens app's front
doors) and nothing but the program's root (app/__main__.py) imports it.
"""
