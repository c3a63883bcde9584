"""The bottom layer: what every package may use, using nothing of the pipeline (only `errors`
and `settings`): the schema toolkit, safe YAML loading, the patch-file format, and NVIDIA's
compatibility tables."""
