"""The standard-library core: aspects and shapes, artifact paths, atomic file writes, release tags,
the GPU tensor plan, the validation photo names and preprocessing, system packages. The client needs
only this; nothing here imports numpy, torch or LiteRT."""
