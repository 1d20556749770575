"""Reading checkpoints: safetensors headers and the inputs (files, shards, model directories)."""
