"""The web demo (`python -m app --ui`); the memory readings it plots come from `monitor/`.

- `server.serve(config)`: loads the model, starts the assistant, serves the page until Ctrl-C.
- `state.LiveState`: what the page shows, accumulated from the assistant's events (shared by all tabs).
- `alerts.AlertBook`: the watches' alerts (latest ones, those on now); `alert_view`: the banner, the list with
  snapshot thumbnails (inline images) and each watch's p_yes.
- `render`: pure functions from a state snapshot to component values (chat messages, plot frames, text).
- `controls.Controls`: the page's buttons as commands to the assistant; bad input becomes a message.
- `evidence`: under each answer, the spans it drew on ("seen at ...") and a few thumbnails of them.
- `history`, `history_tab`: the History tab, searching the timeline through a `HistorySource` the app passes in;
  `day`, `day_tab`: its Day view (the period as strips); `recap`, `recap_tab`: its Recap view (the period's alerts,
  runs of equal answers and gaps, citing their moments).
- `page.build_page`: the Gradio page (a Live and a History tab) as a short list of its sections
  (`page_layout`, one function each) and their wiring: the buttons to `Controls`, the two refresh timers
  (`page_refresh`: what each tab is sent from the shared `LiveState`).
"""
