"""The bottom layer: what every package may use, using nothing of the pipeline (only `errors`,
`settings` and `io`, whose one rule for a file's mode in a layer the patch-file format
shares): the schema toolkit, safe YAML loading, the patch-file format, and NVIDIA's
compatibility tables."""
