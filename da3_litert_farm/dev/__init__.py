"""Developer tools, not used by the farm: benchmarks and the FP16 precision profiler."""
