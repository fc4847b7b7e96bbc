"""Yes/no watches: standing conditions checked on the streams, alerts that begin and end.

The parts of a watch (its spec, change gate, alert state and schedule): a floor below the stream that holds its
watches (app/stream.py). Running the checks on a stream is app/watch_checks.py, above both."""
