"""The terminal's parts: questions typed on stdin (`stdin_questions.py`), the typed watch commands
(`watch_commands.py`), the printer of events (`printer.py`) and the `history` command (`history.py`). app/terminal.py
wires them to the assistant."""
