"""Build and release operations: the parallel/distributed build, the catalog, publishing, pruning."""
