"""Memory readings in a room of their own: `memory_monitor.MemoryMonitor` (device, unified and process memory,
whichever this machine can report) and its backends (`backends/`: NVML, tegrastats, /proc/meminfo, CPU only).
Used by the app (answer events, the page's plot), jetson/ and scripts/; imports nothing of the project."""
