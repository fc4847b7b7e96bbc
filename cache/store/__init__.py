"""Tier 2: the host KV store. Evicted blocks of the device cache, their key-bound index, where their bytes
live (RAM or a folder), their optional int8/int4 compression, and recall of the best blocks per question."""
