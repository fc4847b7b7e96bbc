"""Which model and how to talk to it.

config.py     ModelConfig (model / device / dtype / trust_remote_code), resolve_device, resolve_dtype
loading.py    load_model(config, text_attention) -> LoadedModel; ModelLoadError
families.py   the supported families (model_type -> model class, image processor class, adapter class)
adapters/     one adapter per family: prompt layout, frame preprocessing, positions, embeddings
processor.py  VisionTextProcessor: tokenizer + PIL image processor + video settings (no torchvision)
tiny.py       build_tiny(family, seed): random-weight tiny models for tests and `--model tiny`
change.py     ChangeConfig, ChangeTracker: which regions of a clip changed since the cache last saw them
sparse_clip.py  a clip with its unchanged visual tokens left out, the rest at their whole-clip positions
session.py    the streaming session (chunked prefill, eviction, decoding), on top of the adapters

Submodules are imported explicitly (`from model.loading import load_model`) so that importing
`model.config` stays cheap.
"""
