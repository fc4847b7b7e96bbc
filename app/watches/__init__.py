"""Yes/no watches: standing conditions checked on the streams, alerts that begin and end."""
